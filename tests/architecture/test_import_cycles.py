"""The package's import structure: no module imports itself back through others (lazy imports included),
except RLlib's own pattern of a config and its algorithm naming each other."""

import ast
from pathlib import Path

import rllib_llm

PACKAGE = Path(rllib_llm.__file__).parent
#: RLlib's lazy config <-> algorithm pairs (``get_default_config`` / ``algo_class``), per package.
ALLOWED = {frozenset({"algorithms.config", "algorithms.algorithm"}), frozenset({"multi_agent.config", "multi_agent.algorithm"})}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports anywhere in its body (``from a.b import c`` counts ``a.b``
    and, when ``a.b.c`` is a module, that too)."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("rllib_llm"):
                base = node.module.removeprefix("rllib_llm").lstrip(".")
                targets = [base] + [f"{base}.{a.name}".lstrip(".") for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name.removeprefix("rllib_llm").lstrip(".") for a in node.names if a.name.startswith("rllib_llm")]
            graph[name].update(t for t in targets if t in modules and t and t != name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_cycle_finder_sees_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]


def test_no_import_cycles_in_the_package():
    # Package __init__ files re-export their modules; an __init__ importing its own submodules is no cycle.
    graph = {m: {t for t in targets if not (t.startswith(m + ".") or m.startswith(t + ".") and t)} for m, targets in import_graph().items()}
    bad = [sorted(c) for c in cycles(graph) if frozenset(c) not in ALLOWED]
    assert not bad, f"import cycles: {bad}"


def test_the_core_never_imports_the_run_tooling():
    graph = import_graph()
    core = {m: {t for t in targets if t == "run" or t.startswith("run.")} for m, targets in graph.items()
            if m != "run" and not m.startswith("run.")}  # fmt: skip
    assert not {m: t for m, t in core.items() if t}


#: The package's floors, bottom first (a top-level module or subpackage per name): a module imports only
#: from its own floor's rooms or the floors below. notes/ARCHITECTURE.md draws the same picture.
FLOORS = [
    {"columns", "token_forward", "checkpoint_files", "log_notices", "http", "moved_modules", "registry"},
    {"metrics", "generation", "envs"},
    {"env_connectors"},
    {"core"},
    {"algorithms"},
    {"multi_agent", "prompt_agent"},
    {"run"},
]


def floor_of(module: str) -> int:
    room = module.split(".")[0] or module
    return next(i for i, rooms in enumerate(FLOORS) if room in rooms)


def upward_imports(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(importer, imported) pairs where the imported module stands on a higher floor."""
    return sorted((m, t) for m, targets in graph.items() if m for t in targets if floor_of(t) > floor_of(m))


def test_every_module_has_a_floor():
    assert all(floor_of(m) >= 0 for m in import_graph() if m)


def test_upward_import_finder_sees_one():
    assert upward_imports({"core.rl_module": {"algorithms.learner"}, "algorithms.learner": {"core.rl_module"}}) == [
        ("core.rl_module", "algorithms.learner")
    ]


def test_no_module_imports_one_above_it():
    assert not upward_imports(import_graph())

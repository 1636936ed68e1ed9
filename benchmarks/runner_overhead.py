"""What the EnvRunner costs around generation: milliseconds per env step with a backend that answers at once.

    python benchmarks/runner_overhead.py [--envs 64 256 1024] [--trees BEFORE_DIR .]

Issue 23 asks the whole EnvRunner to keep >= 0.9x of its backend's own throughput; on an H200 with vLLM it kept
0.84-0.89x (benchmarks/results/vllm_h200.md, "Rollout throughput"): the rest is prompt building, parsing, env
steps and module bookkeeping, which run between generate calls. This plays the main job's rollouts
(``tuned_examples/numberline_gigpo.py``, the embedded model's tokenizer and module, 6-step episodes) with a
backend that returns a fixed 32-token reply instantly, so the wall time of ``sample()`` is that overhead alone.
``--trees`` runs the same measurement in a child process per source tree (e.g. a ``git worktree`` of an older
commit, then this one), side by side in one run. Writes ``benchmarks/results/runner_overhead.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
REPLY = "<action>+</action>"


def measure(envs: list[int], repeats: int) -> dict[str, Any]:
    """Median ms per env step of ``repeats`` rollouts per env count, in this process's source tree."""
    sys.path.insert(0, os.getcwd())
    from rllib_llm.generation.base import GenerationBackend, GenerationOutput
    from rllib_llm.run.cli import load_tuned_example

    class Instant(GenerationBackend):
        def __init__(self, tokenizer: Any) -> None:
            self.ids = (tokenizer(REPLY, add_special_tokens=False)["input_ids"] * 8)[:32]
            self.text = tokenizer.decode(self.ids)

        def generate(self, prompts: list[list[int]], params: Any) -> list[GenerationOutput]:
            return [GenerationOutput(token_ids=list(self.ids), logprobs=[-1.0] * len(self.ids), text=self.text,
                                     finish_reason="length") for _ in prompts]

        def update_weights(self, state: dict[str, Any]) -> None:
            pass

    from rllib_llm.core.single_agent_env_runner import LLMEnvRunner

    config, _ = load_tuned_example(Path(os.getcwd()) / "tuned_examples" / "numberline_gigpo.py")
    config = config.copy(copy_frozen=False).group_rollouts(group_size=1, num_groups=1, max_episode_steps=6)
    runner = LLMEnvRunner(config=config)
    runner.module.generation_backend = Instant(runner.module.tokenizer)
    runner.sample(seeds=list(range(8)), group_size=1)  # warm-up
    rows = []
    for n in envs:
        times = []
        for r in range(repeats):
            start = time.perf_counter()
            episodes = runner.sample(seeds=list(range(r * n, (r + 1) * n)), group_size=1)
            times.append(1000 * (time.perf_counter() - start) / sum(len(e) for e in episodes))
        rows.append({"envs": n, "ms_per_env_step": statistics.median(times), "runs": times})
        print(f"{n:>5} envs: {rows[-1]['ms_per_env_step']:.3f} ms per env step", file=sys.stderr, flush=True)
    return {"tree": os.getcwd(), "rows": rows}


def git_commit(tree: Path) -> str:
    out = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return out.stdout.strip() or "?"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--envs", type=int, nargs="+", default=[64, 256, 1024])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--trees", type=Path, nargs="+", default=[ROOT], help="source trees, one child process each")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--results-dir", type=Path, default=RESULTS)
    parser.add_argument("--stem", default="runner_overhead")
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.envs, args.repeats)))
        return {}
    sys.path.insert(0, str(ROOT))  # the parent only: a child imports rllib_llm from its own tree
    from benchmarks._common import load_average

    trees = []
    load_before = load_average()
    for tree in args.trees:
        env = {**os.environ, "PYTHONPATH": str(tree.resolve()), "TOKENIZERS_PARALLELISM": "false"}
        out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", "--envs", *map(str, args.envs),
                              "--repeats", str(args.repeats)], cwd=tree, env=env, capture_output=True, text=True)
        if out.returncode:
            raise SystemExit(f"{tree}: {out.stderr[-2000:]}")
        trees.append({**json.loads(out.stdout.strip().splitlines()[-1]), "commit": git_commit(tree),
                      "load_avg_after": load_average()})
    result = {"date": time.strftime("%Y-%m-%d"), "cpu_count": os.cpu_count(), "reply": REPLY,
              "load_avg_before": load_before, "trees": trees}
    header = "| envs | " + " | ".join(f"`{t['commit']}` ms / env step" for t in trees) + (
        " | first / last |" if len(trees) > 1 else " |")
    lines = [f"# EnvRunner overhead per env step ({result['date']}, {os.cpu_count()} CPU cores)", "",
             "`python benchmarks/runner_overhead.py`: the main job's EnvRunner with a backend that answers a fixed "
             "32-token reply instantly (6-step episodes, one env per seed), so `sample()` is all overhead: prompt "
             "building, parsing, env steps, bookkeeping. Median of "
             f"{args.repeats} rollouts per size; each source tree in its own process, one after the other. Load "
             f"average (1, 5, 15 min) before: {load_before}; after each tree: "
             + "; ".join(f"`{t['commit']}` {t['load_avg_after']}" for t in trees) + ".", "",
             header, "|---:|" + "---:|" * (len(trees) + (len(trees) > 1))]
    for i, n in enumerate(args.envs):
        values = [t["rows"][i]["ms_per_env_step"] for t in trees]
        ratio = f" {values[0] / values[-1]:.2f}x |" if len(trees) > 1 else ""
        lines.append(f"| {n} | " + " | ".join(f"{v:.3f}" for v in values) + " |" + ratio)
    args.results_dir.mkdir(parents=True, exist_ok=True)
    (args.results_dir / f"{args.stem}.json").write_text(json.dumps(result, indent=2))
    (args.results_dir / f"{args.stem}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return result


if __name__ == "__main__":
    main()

"""The README's code as written: its Python config snippet trains on a CPU, and every command line it shows for
``rllib-llm`` or a tuned example parses with the CLI and names files that exist."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
BLOCKS = re.findall(r"```(\w*)\n(.*?)```", README, re.DOTALL)


def commands(block: str) -> list[list[str]]:
    """The shell commands of a block: continuation lines joined, comments dropped, ``a && b`` split."""
    text = re.sub(r"\\\n\s*", " ", block)
    out = []
    for line in text.splitlines():
        line = line.split(" #")[0].strip()
        if not line or line.startswith("#"):
            continue
        for part in line.split("&&"):
            words = shlex.split(part.replace("...", "X"))
            while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):  # `VAR=value command ...`
                words = words[1:]
            if words:
                out.append(words)
    return out


def cli_invocations() -> list[tuple[str, list[str]]]:
    """(the command as written, its arguments to ``rllib-llm``) for each ``rllib-llm ...`` and
    ``python tuned_examples/X.py ...`` line of the README's shell blocks."""
    found = []
    for lang, block in BLOCKS:
        if lang != "bash":
            continue
        for words in commands(block):
            if "--" in words:  # `ray job submit ... -- python tuned_examples/x.py ...`
                words = words[words.index("--") + 1 :]
            if words[0] == "rllib-llm":
                found.append((" ".join(words), words[1:]))
            elif words[0] in ("python", "python3") and len(words) > 1 and words[1].startswith("tuned_examples/"):
                found.append((" ".join(words), ["train", *words[1:]]))
    return found


def test_the_readme_shows_command_lines_and_a_python_snippet():
    assert len(cli_invocations()) >= 10
    assert sum(lang == "python" for lang, _ in BLOCKS) >= 2


@pytest.mark.parametrize(("written", "args"), cli_invocations(), ids=lambda v: v if isinstance(v, str) else None)
def test_every_readme_command_line_parses_and_names_existing_files(written, args):
    from rllib_llm.run.cli import build_parser
    from rllib_llm.run.sweeps import build_sweep_parser

    if args[0] == "train" and args[1].endswith("_tune.py"):  # a sweep's own options (sweep_main)
        assert (ROOT / args[1]).is_file(), f"{written}: {args[1]} does not exist"
        build_sweep_parser().parse_args(args[2:])
        return
    parsed = build_parser().parse_args(args)  # argparse exits (a test failure) on an unknown option
    for name in ("tuned_example", "example"):
        path = getattr(parsed, name, None)
        if path:
            assert (ROOT / path).is_file(), f"{written}: {path} does not exist"


@pytest.mark.slow
def test_the_python_config_snippet_trains_on_a_cpu_as_written(tmp_path):
    [snippet] = [block for lang, block in BLOCKS if lang == "python" and "GiGPOConfig()" in block]
    done = subprocess.run([sys.executable, "-c", snippet], cwd=tmp_path, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert lines[0].startswith("1 ") and lines[1].startswith("2 ") and "'success_rate'" in lines[-1]


@pytest.mark.slow
def test_the_sweep_snippet_runs_as_written_on_the_tiny_example(tmp_path):
    """The README's sweep block, its lines unchanged, after ``config`` (which the README takes from the main
    job) is the tiny example's: 4 trials of 3 iterations, each reporting held-out success, and the best one."""
    [snippet] = [block for lang, block in BLOCKS if lang == "python" and "run_sweep(" in block]
    code = ("from pathlib import Path\n"
            "from rllib_llm.run.cli import load_tuned_example\n"
            f"config, _ = load_tuned_example(Path({str(ROOT / 'tests/fixtures/tiny_numberline.py')!r}))\n"
            + snippet)  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stderr[-3000:]
    best = done.stdout.strip().splitlines()[-1]
    assert "'held_out/success_rate'" in best and "'group_size'" in best and "'lr'" in best
    assert len(list((tmp_path / "runs" / "tune").glob("*/*/"))) >= 4  # a trial folder per grid point

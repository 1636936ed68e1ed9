"""Real ``rllib-llm train`` runs of the tiny model SIGKILLed (with the Ray processes they started) at random
moments and once inside a checkpoint save, then ``--resume``d to the end: the progress rows, the final
Learner state and the evaluations equal those of a run never killed, and the folder has one MLflow run,
FINISHED. The same loop with >= 50 kills of a stand-in algorithm is ``test_kill_loop.py`` (default suite)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from rllib_llm.checkpoint_files import read_checkpoint_state
from rllib_llm.run.checkpoints import CHECKPOINT_NAME, TMP_SUFFIX
from tests.run.test_kill_loop import final_state, mlflow_runs_of, progress, summary

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = "tests/fixtures/tiny_numberline.py"
ITERATIONS = 6


def train(run_dir: Path, uri: str, resume: bool) -> list[str]:
    return [sys.executable, "-m", "rllib_llm.run.cli", "train", EXAMPLE, "--output", str(run_dir), "--iterations",
            str(ITERATIONS), "--checkpoint-every", "1", "--tracking-uri", uri, "--experiment", "kills",
            "--eval-seeds", "3", *(["--resume"] if resume else [])]


def rows_of(run_dir: Path) -> int:
    try:
        return len((run_dir / "progress.jsonl").read_text().splitlines())
    except OSError:
        return 0


def start(argv: list[str]) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(argv, cwd=ROOT, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def kill_group(proc: subprocess.Popen) -> bool:
    """SIGKILLs the run and what it started (its own session: Ray's local processes); False if it had ended."""
    ended = proc.poll() is not None
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    return not ended


def same(a, b) -> bool:
    """Exact equality of nested states holding tensors and arrays."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, np.ndarray):
        return np.array_equal(a, b)
    return a == b


def finish(proc: subprocess.Popen) -> None:
    try:
        _, err = proc.communicate(timeout=480)
    finally:
        kill_group(proc)
    assert proc.returncode == 0, err[-3000:]


@pytest.mark.slow
def test_tiny_model_killed_at_random_and_inside_a_save_resumes_to_the_never_killed_end(tmp_path):
    uri = str(tmp_path / "mlruns")
    reference, run_dir = tmp_path / "never_killed", tmp_path / "killed"
    started = time.monotonic()
    finish(start(train(reference, uri, resume=False)))
    run_s = time.monotonic() - started

    rng = random.Random(0)
    kills = in_save = 0
    for when in ("inside_a_save", "during_an_iteration", "during_an_iteration"):
        proc = start(train(run_dir, uri, resume=run_dir.exists()))
        saving, rows = run_dir / (CHECKPOINT_NAME + TMP_SUFFIX), rows_of(run_dir)
        deadline = time.monotonic() + 480
        while time.monotonic() < deadline and proc.poll() is None:
            if when == "inside_a_save" and saving.exists():
                break
            if when == "during_an_iteration" and rows_of(run_dir) > rows:  # training, not start-up
                time.sleep(rng.uniform(0.0, run_s / ITERATIONS))
                break
            time.sleep(0.001)
        if kill_group(proc):
            kills += 1
            in_save += saving.exists()
    finish(start(train(run_dir, uri, resume=True)))

    assert kills >= 2 and in_save >= 1, (kills, in_save)
    assert [row["iter"] for row in progress(run_dir)] == list(range(1, ITERATIONS + 1))
    assert progress(run_dir) == progress(reference)  # no gap, no repeat, the same values
    def trained(run: Path) -> dict:  # the weights and optimizer state (the Learner's timers differ run to run)
        learner = run / CHECKPOINT_NAME / "learner_group" / "learner"
        weights = read_checkpoint_state(learner / "rl_module" / "default_policy")
        return {"weights": weights, "optimizer": final_state(run)["optimizer"]}

    assert trained(reference)["weights"] and trained(reference)["optimizer"]
    assert same(trained(run_dir), trained(reference))
    print(f"tiny model: {kills} SIGKILLs survived ({in_save} inside a checkpoint save), same end as never killed")
    assert summary(run_dir) == summary(reference)
    assert sorted(p.name for p in run_dir.iterdir() if p.name.startswith(CHECKPOINT_NAME)) == [CHECKPOINT_NAME]
    assert [r.info.status for r in mlflow_runs_of(uri, run_dir)] == ["FINISHED"]

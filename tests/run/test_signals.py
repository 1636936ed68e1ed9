"""Signals and the run folder's lock, with the real CLI, the real algorithm and Ray in subprocesses.

SIGTERM used to end a run with Ray's abort (rc 134, a C++ stack dump, the MLflow run FAILED): ``ray.init()``
installs a SIGTERM handler after the CLI's. Ctrl-C printed a 63-line traceback. Two ``--resume`` of one folder
at once both ran and interleaved their rows."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("mlflow")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "tests" / "fixtures" / "tiny_numberline.py"


def start(run_dir: Path, uri: Path, *extra: str) -> subprocess.Popen:
    argv = [sys.executable, "-m", "rllib_llm.run.cli", "train", str(EXAMPLE), "--output", str(run_dir),
            "--iterations", "200", "--checkpoint-every", "1", "--eval-seeds", "2", "--tracking-uri", str(uri), *extra]
    return subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})


def rows(run_dir: Path) -> list[dict]:
    path = run_dir / "progress.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def wait_for_rows(process: subprocess.Popen, run_dir: Path, count: int, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while len(rows(run_dir)) < count:
        assert process.poll() is None, process.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "no progress rows in time"
        time.sleep(0.2)


def mlflow_statuses(uri: Path) -> list[str]:
    """The statuses of the MLflow runs in the store a run's ``--tracking-uri DIR`` makes (``DIR/mlflow.db``)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{uri / 'mlflow.db'}")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    return [r.info.status for r in runs]


def test_sigterm_and_ctrl_c_stop_the_real_run_in_one_line_and_resume_continues_it(tmp_path):
    run_dir, uri = tmp_path / "run", tmp_path / "mlruns"
    process = start(run_dir, uri)
    wait_for_rows(process, run_dir, 2)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 128 + signal.SIGTERM, err[-3000:]
    assert err.strip().splitlines()[-1] == "rllib-llm: terminated (SIGTERM): --resume continues from the last checkpoint"
    assert "Traceback" not in err and "Aborted" not in err
    assert mlflow_statuses(uri) == ["KILLED"]
    done = len(rows(run_dir))

    process = start(run_dir, uri, "--resume")  # continues, then Ctrl-C
    wait_for_rows(process, run_dir, done + 1)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 128 + signal.SIGINT, err[-3000:]
    assert err.strip().splitlines()[-1] == "rllib-llm: interrupted (Ctrl-C): --resume continues from the last checkpoint"
    assert "Traceback" not in err
    iters = [int(row["iter"]) for row in rows(run_dir)]
    assert iters == list(range(1, len(iters) + 1)) and len(iters) > done
    assert mlflow_statuses(uri) == ["KILLED"]  # the same MLflow run, continued and closed again


def test_a_second_run_into_a_folder_in_use_is_refused_naming_the_holder(tmp_path):
    """Two real processes: one holds the folder (the lock as a run takes it), the CLI's --resume is refused in
    one line naming the holder's pid, and runs once the holder is gone (a dead holder's lock goes with it)."""
    run_dir = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time, pathlib; from rllib_llm.run.cli import lock_run_folder; "
         "lock = lock_run_folder(pathlib.Path(sys.argv[1])); print('held', flush=True); time.sleep(120)", str(run_dir)],
        cwd=ROOT, stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        second = subprocess.run([sys.executable, "-m", "rllib_llm.run.cli", "train", str(EXAMPLE), "--output",
                                 str(run_dir), "--resume", "--no-tracking", "--no-eval"],
                                cwd=ROOT, capture_output=True, text=True, timeout=120)  # fmt: skip
        assert second.returncode == 2
        assert second.stderr.strip() == (f"rllib-llm: error: Run folder {run_dir} is in use by another run (process "
                                         f"{holder.pid}): wait for it to end, or pick another --output.")
        assert not (run_dir / "progress.jsonl").exists()
    finally:
        holder.kill()
        holder.wait()
    third = subprocess.run([sys.executable, "-m", "rllib_llm.run.cli", "train", str(EXAMPLE), "--output", str(run_dir),
                            "--resume", "--no-tracking", "--no-eval"], cwd=ROOT, capture_output=True, text=True,
                           timeout=300)  # fmt: skip
    assert third.returncode == 0, third.stderr[-3000:]
    assert [int(row["iter"]) for row in rows(run_dir)] == [1]

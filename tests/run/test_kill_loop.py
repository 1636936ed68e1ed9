"""Random SIGKILLs of ``rllib-llm train``, then ``--resume``, again and again: nothing lost, nothing repeated.

The CLI's real loop (progress rows, trajectories, atomic checkpoints every iteration, MLflow) runs a stand-in
algorithm that trains in milliseconds (``tests/fixtures/standin_example.py``), in a forked child that the
test SIGKILLs at a random moment (start-up, an iteration, inside a checkpoint save, the final evaluation),
then resumes, until the run finishes. Every finished run must equal one never killed: progress rows 1..N
with the same values, the same final weights and evaluations, and one MLflow run, FINISHED.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from pathlib import Path

import pytest

from rllib_llm.run import cli
from rllib_llm.run.checkpoints import CHECKPOINT_NAME, TMP_SUFFIX

pytest.importorskip("mlflow")

EXAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "standin_example.py"
ITERATIONS = 12
MIN_KILLS = 50
VOLATILE = ("time_s", "wall_time", "tok/s")  # wall-clock columns of a progress row


@pytest.fixture(autouse=True)
def imports_done(tmp_path_factory, monkeypatch):
    """One run in this process first, against a throwaway MLflow store: every module a run imports is then
    imported before the forks, so each child starts in milliseconds, not seconds (the test's own stores are
    first opened in the children, never shared with the parent through a fork)."""
    monkeypatch.setattr(cli, "init_ray", lambda: None)
    warm = tmp_path_factory.mktemp("warm")
    assert cli.main([*train_argv(warm / "run", str(warm / "mlruns"), resume=False), "--iterations", "1"]) == 0


def train_argv(run_dir: Path, uri: str, resume: bool) -> list[str]:
    return ["train", str(EXAMPLE), "--output", str(run_dir), "--iterations", str(ITERATIONS), "--checkpoint-every",
            "1", "--tracking-uri", uri, "--experiment", "kills", "--eval-seeds", "4", *(["--resume"] if resume else [])]


def own_tqdm_lock() -> None:
    """Gives this (forked) process a tqdm write lock of its own. tqdm's default lock holds a multiprocessing
    RLock made once in the parent and shared by every fork: a child SIGKILLed inside a bar refresh leaves it held
    for ever, and every later bar in the parent and in the next children waits on it (CI on 2026-12-07: the kill
    loop and the 9 CLI tests after it hung until their 900 s timeouts, the lock "held by SomeOtherProcess")."""
    import threading

    from tqdm import tqdm

    tqdm.set_lock(threading.RLock())


def fork_cli(argv: list[str]) -> int:
    """``rllib-llm train`` in a forked child (no Ray: the stand-in needs none, and :func:`imports_done` turned
    ``init_ray`` off), its output discarded."""
    pid = os.fork()
    if pid == 0:  # the child
        code = 99
        try:
            own_tqdm_lock()
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            code = cli.main(argv)
        finally:
            os._exit(code)
    return pid


def test_a_child_killed_inside_a_bar_refresh_leaves_the_parents_tqdm_lock_free():
    """The harness itself (:func:`own_tqdm_lock`): a forked child SIGKILLed while it holds tqdm's lock must not
    leave the parent's held (without it, the parent's next bar would wait for ever)."""
    import threading

    from tqdm import tqdm

    with open(os.devnull, "w") as devnull, tqdm(total=1, disable=False, file=devnull):
        pass  # the parent's lock exists before the fork
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: take the lock, say so, wait to be killed
        try:
            own_tqdm_lock()
            tqdm.get_lock().acquire()
            os.write(ready_w, b"1")
            time.sleep(60)
        finally:
            os._exit(0)
    assert os.read(ready_r, 1) == b"1"
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    took = threading.Event()

    def take() -> None:
        with tqdm.get_lock():
            took.set()

    threading.Thread(target=take, daemon=True).start()
    assert took.wait(5.0), "the parent's tqdm lock is held by the killed child"


def run_to_end(argv: list[str]) -> None:
    _, status = os.waitpid(fork_cli(argv), 0)
    assert os.waitstatus_to_exitcode(status) == 0


def train_with_kills(run_dir: Path, uri: str, rng: random.Random, window_s: float) -> tuple[int, int]:
    """Starts the run, SIGKILLs it after a random delay in ``[0, window_s]``, resumes, until a start finishes;
    returns (kills, kills that left a save unfinished)."""
    kills = in_save = 0
    resume = False
    while True:
        pid = fork_cli(train_argv(run_dir, uri, resume))
        deadline = time.monotonic() + rng.uniform(0.0, window_s)
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                assert os.waitstatus_to_exitcode(status) == 0, f"the run in {run_dir} failed"
                return kills, in_save
            time.sleep(0.001)
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        if os.WIFSIGNALED(status):
            kills += 1
            in_save += (run_dir / (CHECKPOINT_NAME + TMP_SUFFIX)).exists()
        else:  # it finished just before the kill
            assert os.waitstatus_to_exitcode(status) == 0, f"the run in {run_dir} failed"
            return kills, in_save
        resume = run_dir.exists()  # as a scheduler's retry does: a run killed before making its folder starts over


def progress(run_dir: Path) -> list[dict]:
    """The table's columns of each row (per-agent ones included), wall-clock ones left out; the rows' other
    metrics (Tune's names: timers, throughputs, timestamps, the pid) are mostly wall-clock or per process."""
    from rllib_llm.run.progress import COLUMNS

    table = {title for title, _, _ in COLUMNS} - set(VOLATILE)
    rows = [json.loads(line) for line in (run_dir / "progress.jsonl").read_text().splitlines()]
    return [{k: v for k, v in row.items() if k in table or ":" in k} for row in rows]


def final_state(run_dir: Path) -> dict:
    import msgpack_numpy

    return msgpack_numpy.unpackb((run_dir / CHECKPOINT_NAME / "learner_group" / "learner" / "state.msgpack").read_bytes(),
                                 strict_map_key=False)  # fmt: skip


def summary(run_dir: Path) -> dict:
    data = json.loads((run_dir / "summary.json").read_text())
    return {k: data[k] for k in ("before", "after", "iterations_done")}


def test_random_sigkills_then_resume_lose_and_repeat_nothing(tmp_path):
    uri = str(tmp_path / "mlruns")
    reference = tmp_path / "never_killed"
    run_to_end(train_argv(reference, uri, resume=False))  # also creates the MLflow store before any kill
    started = time.monotonic()
    run_to_end(train_argv(tmp_path / "timed", uri, resume=False))  # how long a run takes once the store exists
    window_s = 1.2 * (time.monotonic() - started)

    rng = random.Random(0)
    kills, in_save, runs = 0, 0, []
    while kills < MIN_KILLS:
        run_dir = tmp_path / f"killed_{len(runs)}"
        killed, unfinished_saves = train_with_kills(run_dir, uri, rng, window_s)
        kills, in_save = kills + killed, in_save + unfinished_saves
        runs.append(run_dir)

    expected_rows = progress(reference)
    assert [row["iter"] for row in expected_rows] == list(range(1, ITERATIONS + 1))
    for run_dir in runs:
        assert progress(run_dir) == expected_rows, run_dir  # no gap, no repeat, the same values
        assert final_state(run_dir) == final_state(reference), run_dir
        assert summary(run_dir) == summary(reference), run_dir
        assert sorted(p.name for p in run_dir.iterdir() if p.name.startswith(CHECKPOINT_NAME)) == [CHECKPOINT_NAME]
    assert in_save > 0, "no kill landed inside a checkpoint save"
    print(f"kill loop: {kills} SIGKILLs survived ({in_save} inside a checkpoint save) over {len(runs)} runs")

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("kills")
    stored = client.search_runs([experiment.experiment_id], max_results=1000)
    for run_dir in [reference, *runs]:
        mine = [r for r in stored if r.data.tags.get("run_dir") == str(run_dir.resolve())]
        assert [r.info.status for r in mine] == ["FINISHED"], run_dir  # one run per folder, closed
        history = client.get_metric_history(mine[0].info.run_id, "env_runners/success_rate")
        assert sorted({m.step for m in history}) == list(range(1, ITERATIONS + 1))


def mlflow_runs_of(uri: str, run_dir: Path) -> list:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{Path(uri) / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("kills")
    stored = client.search_runs([experiment.experiment_id], order_by=["attributes.start_time ASC"])
    return [r for r in stored if r.data.tags.get("run_dir") == str(run_dir.resolve())]


def wait_for_rows(run_dir: Path, rows: int, pid: int) -> None:
    deadline = time.monotonic() + 60
    while not (run_dir / "progress.jsonl").exists() or len((run_dir / "progress.jsonl").read_text().splitlines()) < rows:
        assert os.waitpid(pid, os.WNOHANG)[0] == 0, "the run ended early"
        assert time.monotonic() < deadline
        time.sleep(0.005)


def test_sigterm_closes_the_mlflow_run_as_killed_and_resume_continues_it(tmp_path, monkeypatch):
    """SIGTERM (``ray job stop``, a preempted node) ends the run with 143 and its MLflow run KILLED, not RUNNING;
    ``--resume`` continues that same MLflow run to FINISHED."""
    uri, run_dir = str(tmp_path / "mlruns"), tmp_path / "run"
    monkeypatch.setenv("STANDIN_STEP_S", "0.2")
    pid = fork_cli(train_argv(run_dir, uri, resume=False))
    wait_for_rows(run_dir, 2, pid)
    os.kill(pid, signal.SIGTERM)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 128 + signal.SIGTERM
    monkeypatch.setenv("STANDIN_STEP_S", "0.0")
    run_to_end(train_argv(run_dir, uri, resume=True))
    runs = mlflow_runs_of(uri, run_dir)
    assert [r.info.status for r in runs] == ["FINISHED"]
    assert [row["iter"] for row in progress(run_dir)] == list(range(1, ITERATIONS + 1))


def test_a_run_left_running_by_a_kill_is_closed_as_killed_by_the_next_run_in_its_folder(tmp_path, monkeypatch):
    uri, run_dir = str(tmp_path / "mlruns"), tmp_path / "run"
    monkeypatch.setenv("STANDIN_STEP_S", "0.2")
    pid = fork_cli(train_argv(run_dir, uri, resume=False))
    wait_for_rows(run_dir, 1, pid)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    monkeypatch.setenv("STANDIN_STEP_S", "0.0")
    run_to_end([*train_argv(run_dir, uri, resume=False), "--overwrite"])
    assert [r.info.status for r in mlflow_runs_of(uri, run_dir)] == ["KILLED", "FINISHED"]

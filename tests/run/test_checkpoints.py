"""Atomic checkpoints, the last complete checkpoint after a kill at any moment, and corrupt checkpoint files
(no Ray here: a stand-in algorithm writes RLlib's layout)."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rllib_llm import checkpoint_files
from rllib_llm.run import checkpoints
from rllib_llm.run.checkpoints import (
    MARKER_FILE,
    CheckpointError,
    check_checkpoint,
    last_checkpoint,
    read_checkpoint,
    restore,
    resume_run,
    save_checkpoint,
    truncate_jsonl,
)
from rllib_llm.run.cli import main
from tests.run.conftest import FakeAlgo


def names(run_dir: Path) -> list[str]:
    return sorted(p.name for p in run_dir.iterdir())


def test_save_then_find_round_trips_iteration_extra_and_rng(tmp_path, fake_algo):
    fake_algo.iteration = 3
    path = save_checkpoint(fake_algo, tmp_path, {"before": {"success_rate": 0.5}})
    assert path == (tmp_path / "checkpoint").resolve() and names(tmp_path) == ["checkpoint"]
    point = last_checkpoint(tmp_path)
    assert point.iteration == 3 and point.extra == {"before": {"success_rate": 0.5}}
    expected = random.random()
    checkpoints.restore_rng(json.loads((path / checkpoint_files.RNG_FILE).read_text()))
    assert random.random() == expected  # the global RNG continues from where the save left it


def test_a_failed_save_keeps_the_previous_checkpoint(tmp_path, fake_algo, monkeypatch):
    fake_algo.iteration = 1
    save_checkpoint(fake_algo, tmp_path)
    original = fake_algo.save_to_path

    def dies_half_way(path: str, use_msgpack: bool = False) -> str:
        original(path, use_msgpack)
        (Path(path) / "learner_group" / "learner" / "state.msgpack").write_bytes(b"\x82\xa4half")
        raise KeyboardInterrupt  # what a kill in the middle of RLlib's save looks like from here

    fake_algo.iteration = 2
    monkeypatch.setattr(fake_algo, "save_to_path", dies_half_way)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(fake_algo, tmp_path)
    assert "checkpoint.tmp" in names(tmp_path)
    assert last_checkpoint(tmp_path).iteration == 1
    assert names(tmp_path) == ["checkpoint"]  # the incomplete one is cleared away


def test_a_kill_between_the_two_renames_keeps_the_new_checkpoint(tmp_path, fake_algo, monkeypatch):
    fake_algo.iteration = 1
    save_checkpoint(fake_algo, tmp_path)
    real_rename = os.rename
    calls = []

    def rename_once(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise KeyboardInterrupt
        real_rename(src, dst)

    fake_algo.iteration = 2
    monkeypatch.setattr(checkpoints.os, "rename", rename_once)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(fake_algo, tmp_path)
    monkeypatch.undo()
    assert names(tmp_path) == ["checkpoint.old", "checkpoint.tmp"]  # no checkpoint/ at all right now
    point = last_checkpoint(tmp_path)
    assert point.iteration == 2 and point.path == (tmp_path / "checkpoint").resolve()
    assert names(tmp_path) == ["checkpoint"]


SAVER = """
import sys
from pathlib import Path
sys.path.insert(0, {root!r})
from rllib_llm import checkpoint_files
from rllib_llm import checkpoint_files
from rllib_llm.run import checkpoints
from tests.run.conftest import FakeAlgo
checkpoint_files.capture_rng = dict  # the file protocol is under test here, not the RNGs (and torch imports slowly)
algo = FakeAlgo(iteration={start}, payload=2_000_000)
print("ready", flush=True)
while True:
    algo.iteration += 1
    checkpoints.save_checkpoint(algo, Path({run_dir!r}))
"""


def test_sigkill_at_random_moments_of_saving_always_leaves_a_complete_checkpoint(tmp_path):
    root = str(Path(__file__).resolve().parents[2])
    rng = random.Random(0)
    last = 0
    for _ in range(3):
        proc = subprocess.Popen(
            [sys.executable, "-c", SAVER.format(root=root, run_dir=str(tmp_path), start=last)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stdout.readline().strip() == "ready"
            time.sleep(rng.uniform(0.2, 1.0))
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        point = last_checkpoint(tmp_path)
        assert point is not None and point.iteration >= last
        check_checkpoint(point.path)
        assert names(tmp_path) == ["checkpoint"]
        last = point.iteration


def test_restore_sets_the_iteration_and_turns_a_failure_into_one_error(tmp_path, fake_algo):
    fake_algo.iteration = 4
    point = last_checkpoint(Path(save_checkpoint(fake_algo, tmp_path)).parent)
    fresh = FakeAlgo()
    restore(fresh, point)
    assert fresh.iteration == 4

    def incompatible(path: str) -> None:
        raise KeyError("default_policy\n  (deep inside RLlib)")

    fresh.restore_from_path = incompatible
    with pytest.raises(CheckpointError, match="could not restore it") as error:
        restore(fresh, point)
    assert "\n" not in str(error.value) and "KeyError" in str(error.value)


def test_truncate_jsonl_drops_rows_after_the_checkpoint_and_a_torn_line(tmp_path):
    path = tmp_path / "progress.jsonl"
    path.write_text("".join(json.dumps({"iter": float(i)}) + "\n" for i in range(1, 5)) + '{"iter": 5.0, "succ')
    assert truncate_jsonl(path, "iter", 2) == 3
    assert [json.loads(line)["iter"] for line in path.read_text().splitlines()] == [1.0, 2.0]
    assert truncate_jsonl(path, "iter", 2) == 0
    assert truncate_jsonl(tmp_path / "missing.jsonl", "iter", 2) == 0


def test_truncate_jsonl_keeps_a_valid_progress_file_and_drops_only_rows_after_the_checkpoint(tmp_path):
    path = tmp_path / "progress.jsonl"
    rows = [{"iter": float(i), "success": 0.5, "kl": None} for i in range(1, 5)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"iter": 5.0, "succ')
    assert truncate_jsonl(path, "iter", 3, progress=True) == 2
    assert [json.loads(line)["iter"] for line in path.read_text().splitlines()] == [1.0, 2.0, 3.0]


@pytest.mark.parametrize("bad, what", [
    ({"iter": 2.0}, "iteration 3 was due"),  # a row repeated by a second writer
    ({"iter": -7}, "iteration 3 was due"),
    ({"iter": "3"}, "not an integer"),
    ({"iter": 3.5}, "not an integer"),
    ({"iter": 3, "success": "high"}, "non-numeric value"),
    ([3], "not a JSON object"),
])
def test_resume_refuses_a_progress_file_whose_rows_before_the_checkpoint_are_not_the_runs(tmp_path, bad, what):
    """Rows two writers interleaved, or edited, would be kept for ever by a resumed run: one line instead,
    naming the file and line, and the file left as it was."""
    path = tmp_path / "progress.jsonl"
    text = "".join(json.dumps({"iter": i, "success": 0.5}) + "\n" for i in (1, 2)) + json.dumps(bad) + "\n"
    text += json.dumps({"iter": 4, "success": 0.5}) + "\n"
    path.write_text(text)
    with pytest.raises(ValueError, match=f"progress.jsonl line 3: .*{what}") as error:
        truncate_jsonl(path, "iter", 4, progress=True)
    assert "\n" not in str(error.value) and path.read_text() == text
    assert not list(tmp_path.glob("*.tmp"))


def test_truncate_jsonl_reads_line_by_line(tmp_path, monkeypatch):
    """A 300 MB progress file was read whole (1.1 GB resident); now no read of the whole file happens."""
    path = tmp_path / "progress.jsonl"
    path.write_text("".join(json.dumps({"iter": i}) + "\n" for i in range(1, 2001)))
    monkeypatch.setattr(Path, "read_text", lambda *a, **k: pytest.fail("read whole"))
    monkeypatch.setattr(Path, "read_bytes", lambda *a, **k: pytest.fail("read whole"))
    assert truncate_jsonl(path, "iter", 1000, progress=True) == 1000


def test_resume_run_without_a_checkpoint_starts_from_scratch(tmp_path, capsys):
    (tmp_path / "progress.jsonl").write_text(json.dumps({"iter": 1.0}) + "\n")
    assert resume_run(tmp_path, {"progress.jsonl": "iter"}) is None
    assert (tmp_path / "progress.jsonl").read_text() == ""
    assert "starting from scratch" in capsys.readouterr().out


def test_resume_run_refuses_to_restart_over_a_corrupt_checkpoint(tmp_path, fake_algo):
    fake_algo.iteration = 2
    save_checkpoint(fake_algo, tmp_path)
    (tmp_path / "checkpoint" / "algorithm_state.msgpack").write_bytes(b"")
    progress = tmp_path / "progress.jsonl"
    progress.write_text(json.dumps({"iter": 1.0}) + "\n")
    with pytest.raises(CheckpointError, match="algorithm_state.msgpack"):
        resume_run(tmp_path, {"progress.jsonl": "iter"})
    assert progress.read_text() == json.dumps({"iter": 1.0}) + "\n"  # nothing dropped


# --- corrupt checkpoints: one clear error naming the file --------------------------------------------


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> dict[str, Path]:
    """A checkpoint with our marker and one as plain ``algo.save_to_path`` writes it (no marker)."""
    root = tmp_path_factory.mktemp("pristine")
    marked = save_checkpoint(FakeAlgo(iteration=2), root / "marked")
    plain = Path(FakeAlgo(iteration=2).save_to_path(str(root / "plain"), use_msgpack=True))
    return {"marked": marked, "plain": plain}


def corrupt(root: Path, rel: str, how: str, cut: float) -> None:
    file = root / rel
    data = file.read_bytes()
    if how == "delete":
        file.unlink()
    elif how == "empty":
        file.write_bytes(b"")
    elif how == "garbage":
        file.write_bytes(b"garbage \x00\xff" * max(1, len(data) // 10))
    else:  # truncate
        file.write_bytes(data[: int(len(data) * cut)])


def files_of(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and p.name != MARKER_FILE)


CORRUPTIONS = st.sampled_from(["delete", "empty", "garbage", "truncate"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(["marked", "plain"]), index=st.integers(0, 100), how=CORRUPTIONS, cut=st.floats(0, 0.99))
def test_any_corrupt_file_is_named_in_one_error(pristine, kind, index, how, cut):
    if kind == "plain" and how == "truncate":
        how = "garbage"  # without the marker's sizes a cut file can still parse
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(shutil.copytree(pristine[kind], Path(tmp) / "ckpt"))
        files = files_of(root)
        rel = files[index % len(files)]
        corrupt(root, rel, how, cut)
        if kind == "plain" and how == "delete" and rel.endswith("/metadata.json"):
            read_checkpoint(root)  # RLlib restores without a component's metadata file
            return
        with pytest.raises(CheckpointError) as error:
            read_checkpoint(root)
        message = str(error.value)
        assert "\n" not in message
        assert rel in message, message


def test_a_corrupt_marker_is_named(pristine, tmp_path):
    root = Path(shutil.copytree(pristine["marked"], tmp_path / "ckpt"))
    (root / MARKER_FILE).write_text("{not json")
    with pytest.raises(CheckpointError, match=MARKER_FILE):
        read_checkpoint(root)


def test_evaluate_a_corrupt_checkpoint_exits_2_with_one_line(pristine, tmp_path, capsys):
    root = Path(shutil.copytree(pristine["marked"], tmp_path / "ckpt"))
    state = root / "learner_group" / "learner" / "state.msgpack"
    state.write_bytes(state.read_bytes()[:100])
    assert main(["evaluate", str(root)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("rllib-llm: error:")
    assert "learner_group/learner/state.msgpack" in err and "Traceback" not in err
    assert main(["evaluate", str(tmp_path / "nowhere")]) == 2
    assert "is not a directory" in capsys.readouterr().err


def test_flipped_bytes_of_the_same_size_are_caught_by_the_hashes(tmp_path, fake_algo):
    path = save_checkpoint(fake_algo, tmp_path)
    state = path / "learner_group" / "learner" / "state.msgpack"
    data = bytearray(state.read_bytes())
    for i in range(100, 164):  # 64 bytes inside the "weights"
        data[i] ^= 0xFF
    state.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"learner_group/learner/state.msgpack is corrupt: its content changed"):
        read_checkpoint(path)


def test_an_unfinished_save_never_wins_over_or_deletes_a_verified_checkpoint(tmp_path, fake_algo):
    fake_algo.iteration = 1
    save_checkpoint(fake_algo, tmp_path)
    fake_algo.iteration = 2
    fake_algo.save_to_path(str(tmp_path / "checkpoint.tmp"), use_msgpack=True)  # killed before the marker
    point = last_checkpoint(tmp_path)
    assert point.iteration == 1 and point.path == (tmp_path / "checkpoint").resolve()
    assert names(tmp_path) == ["checkpoint"] and (tmp_path / "checkpoint" / MARKER_FILE).is_file()


def test_a_verified_checkpoint_is_preferred_over_one_without_a_marker(tmp_path, fake_algo):
    fake_algo.iteration = 1
    save_checkpoint(fake_algo, tmp_path)
    os.rename(tmp_path / "checkpoint", tmp_path / "checkpoint.old")  # a kill between the two renames
    fake_algo.iteration = 5
    fake_algo.save_to_path(str(tmp_path / "checkpoint"), use_msgpack=True)  # a marker-less checkpoint
    point = last_checkpoint(tmp_path)
    assert point.iteration == 1 and (point.path / MARKER_FILE).is_file()

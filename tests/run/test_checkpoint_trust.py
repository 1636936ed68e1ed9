"""A checkpoint is data others send you: loading one must not run code it carries.

Before: a crafted pickle in ``algorithm_state.pkl`` (or the RNG file) executed during ``rllib-llm evaluate`` /
``--resume``, before the integrity check, and recomputing the marker's sha256 made a tampered checkpoint
pass. Now the state is msgpack and JSON, pickled state is refused unless ``--trust-checkpoint``, msgpack
records that msgpack_numpy would unpickle are refused too, and RLlib's pickled constructor files are never
read by a restore into an algorithm built from a config."""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import msgpack
import pytest

from rllib_llm.checkpoint_files import MARKER_FILE, UnsafeCheckpointError, _files, _hashes, unsafe_files
from rllib_llm.run.checkpoints import read_checkpoint, save_checkpoint
from rllib_llm.run.cli import main

pytestmark = pytest.mark.usefixtures("ray_session")

EXAMPLE = "tests/fixtures/tiny_numberline.py"


class Payload:
    """Unpickling this writes the file ``flag``: the proof that a load ran the checkpoint's code."""

    def __init__(self, flag: Path) -> None:
        self.flag = flag

    def __reduce__(self):
        return exec, (f"open({str(self.flag)!r}, 'w').write('pwned')",)


def as_attacker(root: Path) -> None:
    """Recomputes the marker's sizes and hashes, as anyone who edits a checkpoint can."""
    marker = json.loads((root / MARKER_FILE).read_text())
    marker["files"], marker["sha256"] = _files(root), _hashes(root)
    (root / MARKER_FILE).write_text(json.dumps(marker))


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A CLI run of the tiny example (1 iteration, checkpointed): its run folder."""
    run = tmp_path_factory.mktemp("trusted") / "run"
    assert main(["train", EXAMPLE, "--output", str(run), "--no-tracking", "--eval-seeds", "2"]) == 0
    return run


def copy_run(trained: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(trained, tmp_path / "run"))


def test_a_checkpoint_holds_no_pickled_state(trained):
    root = trained / "checkpoint"
    pickled = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.pkl"))
    assert pickled and all(p.endswith("class_and_ctor_args.pkl") for p in pickled)  # RLlib's constructors only
    assert (root / "algorithm_state.msgpack").is_file() and (root / "rllib_llm_rng.json").is_file()
    assert unsafe_files(root) == []


@pytest.mark.parametrize("target", ["algorithm_state.pkl", "rllib_llm_rng.pkl", "learner_group/learner/state.pkl"])
def test_resume_and_evaluate_refuse_a_pickled_state_file_without_running_it(trained, tmp_path, capsys, target):
    run = copy_run(trained, tmp_path)
    flag = tmp_path / "flag"
    (run / "checkpoint" / target).write_bytes(pickle.dumps(Payload(flag)))
    as_attacker(run / "checkpoint")
    resume = ["train", EXAMPLE, "--output", str(run), "--resume", "--iterations", "2", "--no-tracking", "--no-eval"]
    for argv in (resume, ["evaluate", str(run / "checkpoint"), "--example", EXAMPLE],
                 ["evaluate", str(run / "checkpoint")]):  # fmt: skip
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and target in err and "--trust-checkpoint" in err, err
    assert not flag.exists()


def test_a_msgpack_record_that_msgpack_numpy_would_unpickle_is_refused(trained, tmp_path):
    run = copy_run(trained, tmp_path)
    flag = tmp_path / "flag"
    record = {b"nd": True, b"kind": b"O", b"type": "|O", b"shape": [1], b"data": pickle.dumps(Payload(flag))}
    state = run / "checkpoint" / "env_runner" / "state.msgpack"
    state.write_bytes(msgpack.packb({"rng": record}))
    as_attacker(run / "checkpoint")
    with pytest.raises(UnsafeCheckpointError, match="env_runner/state.msgpack"):
        read_checkpoint(run / "checkpoint")
    assert not flag.exists()


def test_resume_never_reads_rllibs_pickled_constructor_files(trained, tmp_path, capsys):
    """RLlib writes ``class_and_ctor_args.pkl`` in every component (its ``from_checkpoint`` needs them); a
    restore into the algorithm built from the example's config must not read them: crafted ones stay inert."""
    run = copy_run(trained, tmp_path)
    flag = tmp_path / "flag"
    for ctor in (run / "checkpoint").rglob("class_and_ctor_args.pkl"):
        ctor.write_bytes(pickle.dumps(Payload(flag)))
    as_attacker(run / "checkpoint")
    assert main(["train", EXAMPLE, "--output", str(run), "--resume", "--iterations", "2", "--no-tracking",
                 "--no-eval"]) == 0  # fmt: skip
    assert main(["evaluate", str(run / "checkpoint"), "--example", EXAMPLE, "--num-seeds", "2"]) == 0
    assert not flag.exists()
    assert [json.loads(line)["iter"] for line in (run / "progress.jsonl").read_text().splitlines()] == [1, 2]


def test_trust_checkpoint_loads_an_older_pickled_checkpoint(tmp_path):
    """Checkpoints written before this version (pickled state) still load when the user vouches for them."""
    from tests.run.conftest import FakeAlgo

    class PickledAlgo(FakeAlgo):
        def save_to_path(self, path: str, use_msgpack: bool = False) -> str:
            return super().save_to_path(path, use_msgpack=False)  # what RLlib writes by default

    save_checkpoint(PickledAlgo(iteration=4), tmp_path)
    with pytest.raises(UnsafeCheckpointError, match="algorithm_state.pkl"):
        read_checkpoint(tmp_path / "checkpoint")
    assert read_checkpoint(tmp_path / "checkpoint", trust=True).iteration == 4


def test_the_scan_unpickles_nothing_after_msgpack_numpy_patched_msgpack(tmp_path):
    """RLlib's msgpack checkpoints patch msgpack process-wide (msgpack_numpy.patch): a scan through
    ``msgpack.unpack`` would itself unpickle the record it looks for."""
    import msgpack_numpy
    from msgpack.fallback import Packer

    from rllib_llm.checkpoint_files import msgpack_unpatched_after

    flag = tmp_path / "flag"
    record = {b"nd": True, b"kind": b"O", b"type": "|O", b"shape": [1], b"data": pickle.dumps(Payload(flag))}
    (tmp_path / "state.msgpack").write_bytes(Packer().pack({"x": record}))
    with msgpack_unpatched_after():  # the patch must not outlive the test: Ray's messages go through msgpack
        msgpack_numpy.patch()
        assert unsafe_files(tmp_path) == ["state.msgpack"]
    assert not flag.exists()
    assert msgpack.unpackb is not msgpack_numpy.unpackb

"""Run-tooling fixtures: one tracked CLI training run of the tiny example, shared by the tracking,
trajectory and plot tests (a run costs about a minute on 2 shared cores), and a stand-in algorithm that
writes RLlib's checkpoint layout fast (checkpoint tests)."""

from __future__ import annotations

import json
import pickle
import struct
from pathlib import Path

import pytest

TINY_EXAMPLE = "tests/fixtures/tiny_numberline.py"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="session")
def tracked_run(tmp_path_factory, ray_session):
    """``rllib-llm train`` of the tiny example, tracked to a fresh local MLflow store."""
    from rllib_llm.run.cli import main

    root = tmp_path_factory.mktemp("tracked")
    run_dir, mlruns = root / "run", root / "mlruns"
    argv = ["train", TINY_EXAMPLE, "--output", str(run_dir), "--tracking-uri", str(mlruns), "--experiment", "eco"]
    assert main(argv) == 0
    return {"run_dir": run_dir, "mlruns": mlruns, "summary": json.loads((run_dir / "summary.json").read_text())}


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) of a PNG file, checking its signature and IHDR chunk."""
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, f"{path} is not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


#: RLlib's layout (one component per directory: metadata, class, state), as ``Algorithm.save_to_path`` writes.
LAYOUT = {
    "": "algorithm_state.msgpack",
    "learner_group": "state.msgpack",
    "learner_group/learner": "state.msgpack",
    "env_runner": "state.msgpack",
}


class FakeAlgo:
    """Has what :func:`rllib_llm.run.checkpoints.save_checkpoint` uses (``iteration``, ``save_to_path``) and writes
    RLlib's layout as ``save_to_path(use_msgpack=True)`` does (msgpack state, pickled constructor files, JSON),
    ``payload`` bytes of "weights" per state file; ``use_msgpack=False`` writes pickled state, RLlib's default."""

    def __init__(self, iteration: int = 0, payload: int = 2000) -> None:
        self.iteration, self.payload = iteration, payload

    def save_to_path(self, path: str, use_msgpack: bool = False) -> str:
        import msgpack

        root = Path(path)
        for component, state_file in LAYOUT.items():
            folder = root / component
            folder.mkdir(parents=True, exist_ok=True)
            meta = "rllib_checkpoint.json" if not component else "metadata.json"
            stem = state_file.removesuffix(".msgpack")
            (folder / meta).write_text(json.dumps({"state_file": stem, "checkpoint_version": "2.1"}))
            (folder / "class_and_ctor_args.pkl").write_bytes(
                pickle.dumps({"class": None, "ctor_args_and_kwargs": ((), {})})
            )
            state = {"training_iteration": self.iteration, "weights": bytes(range(256)) * (self.payload // 256)}
            if use_msgpack:
                (folder / state_file).write_bytes(msgpack.packb(state))
            else:
                (folder / f"{stem}.pkl").write_bytes(pickle.dumps(state))
        return str(root)

    def restore_from_path(self, path: str) -> None:
        import msgpack

        self.iteration = msgpack.unpackb((Path(path) / "algorithm_state.msgpack").read_bytes())["training_iteration"]


@pytest.fixture
def fake_algo() -> FakeAlgo:
    return FakeAlgo()

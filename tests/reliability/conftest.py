"""Shared pieces of the reliability tests: a stand-in algorithm that writes RLlib's checkpoint layout fast."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

#: RLlib's layout (one component per directory: metadata, class, state), as ``Algorithm.save_to_path`` writes.
LAYOUT = {
    "": "algorithm_state.pkl",
    "learner_group": "state.pkl",
    "learner_group/learner": "state.pkl",
    "env_runner": "state.pkl",
}


class FakeAlgo:
    """Has what :func:`rllib_llm.run.checkpoints.save_checkpoint` uses (``iteration``, ``save_to_path``) and writes
    real pickles and JSON in RLlib's layout, ``payload`` bytes of "weights" per state file."""

    def __init__(self, iteration: int = 0, payload: int = 2000) -> None:
        self.iteration, self.payload = iteration, payload

    def save_to_path(self, path: str) -> str:
        root = Path(path)
        for component, state_file in LAYOUT.items():
            folder = root / component
            folder.mkdir(parents=True, exist_ok=True)
            meta = "rllib_checkpoint.json" if not component else "metadata.json"
            stem = state_file.removesuffix(".pkl")
            (folder / meta).write_text(json.dumps({"state_file": stem, "checkpoint_version": "2.1"}))
            (folder / "class_and_ctor_args.pkl").write_bytes(
                pickle.dumps({"class": None, "ctor_args_and_kwargs": ((), {})})
            )
            state = {"training_iteration": self.iteration, "weights": bytes(range(256)) * (self.payload // 256)}
            (folder / state_file).write_bytes(pickle.dumps(state))
        return str(root)

    def restore_from_path(self, path: str) -> None:
        self.iteration = pickle.loads((Path(path) / "algorithm_state.pkl").read_bytes())["training_iteration"]


@pytest.fixture
def fake_algo() -> FakeAlgo:
    return FakeAlgo()

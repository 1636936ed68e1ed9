"""What one rllib-llm checkpoint directory holds, written the same way by ``rllib-llm train`` and by Tune.

RLlib's own checkpoint (``Algorithm.save_to_path``: the LearnerGroup with module weights and optimizer state,
the EnvRunner state with its seed RNG and rollout counter, the metrics logger, ``training_iteration``), plus
the process-global RNGs (``random``, numpy, torch), which the generation backend samples from, plus a marker
written last (``rllib_llm_checkpoint.json``: the iteration, every file's size and sha256, and what the CLI
needs to continue) that makes the directory checkable before anything is unpickled. The CLI's atomic swap
and resume logic (:mod:`rllib_llm.run.checkpoints`) and ``LLMAlgorithm.save_checkpoint`` (Tune's hook) both
call :func:`write_checkpoint`.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import random
import time
from pathlib import Path
from typing import Any

TMP_SUFFIX = ".tmp"
MARKER_FILE = "rllib_llm_checkpoint.json"
RNG_FILE = "rllib_llm_rng.pkl"
MARKER_FORMAT = 2


def write_checkpoint(algo: Any, directory: str | Path, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Writes ``algo``'s checkpoint into ``directory`` (RLlib's state, the RNGs, then the marker, each file
    synced) and returns the marker. ``extra`` (JSON-able) is stored in the marker."""
    directory = Path(directory)
    algo.save_to_path(str(directory))
    with open(directory / RNG_FILE, "wb") as f:
        pickle.dump(capture_rng(), f)
    for path in directory.rglob("*"):
        fsync_path(path)
    marker = {
        "format": MARKER_FORMAT,
        "training_iteration": int(algo.iteration),
        "saved_at": time.time(),
        "files": _files(directory),
        "sha256": _hashes(directory),
        "extra": dict(extra or {}),
    }
    write_json_atomic(directory / MARKER_FILE, marker)  # the checkpoint is complete from here on
    fsync_path(directory)
    return marker


def fsync_path(path: Path) -> None:
    """Flushes a file or directory to disk (a rename is only durable once its directory is synced)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _files(root: Path) -> dict[str, int]:
    """``relative path -> size`` of every file under ``root`` except the marker."""
    return {
        p.relative_to(root).as_posix(): p.stat().st_size
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != MARKER_FILE
    }


def sha256_file(path: Path) -> str:
    """The file's SHA-256, read in 1 MiB blocks (checkpoint files can be large)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _hashes(root: Path) -> dict[str, str]:
    """``relative path -> sha256`` of every file under ``root`` except the marker: a flipped byte in a file
    of the right size (bit rot, a bad copy) is caught before its weights are loaded."""
    return {rel: sha256_file(root / rel) for rel in _files(root)}


def write_json_atomic(path: Path, payload: Any) -> None:
    """Writes JSON to ``path`` so that readers see the old or the new content, never half of it."""
    tmp = path.with_name(path.name + TMP_SUFFIX)
    with open(tmp, "w") as f:
        json.dump(payload, f, indent=2, default=str)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def capture_rng() -> dict[str, Any]:
    """The process-global RNG states (the HF backend samples from torch's global generator)."""
    import numpy as np
    import torch

    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["torch_cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict[str, Any]) -> None:
    import numpy as np
    import torch

    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "torch_cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["torch_cuda"])

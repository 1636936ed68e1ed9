"""What one rllib-llm checkpoint directory holds, written the same way by ``rllib-llm train`` and by Tune.

RLlib's own checkpoint (``Algorithm.save_to_path``: the LearnerGroup with module weights and optimizer state,
the EnvRunner state with its seed RNG and rollout counter, the metrics logger, ``training_iteration``) with its
state files in msgpack (RLlib's ``use_msgpack``), plus the process-global RNGs (``random``, numpy, torch),
which the generation backend samples from, as JSON, plus a marker written last (``rllib_llm_checkpoint.json``:
the iteration, every file's size and sha256, and what the CLI needs to continue) that makes the directory
checkable before anything is loaded.

Trust: loading a pickle runs whatever code it names, and a checkpoint is something users pass around. So the
state this package loads is never a pickle: :func:`check_safe_to_load` refuses a checkpoint with pickled state
files (older checkpoints, or ones written by RLlib's default) and msgpack files holding msgpack_numpy's
"object array" records (which it unpickles), unless the user says the checkpoint is trusted
(``--trust-checkpoint``). RLlib's ``class_and_ctor_args.pkl`` files are still written (RLlib's own
``Algorithm.from_checkpoint`` needs them) but never read by a restore into an algorithm built from a config.
The marker's hashes catch corruption, not tampering: anyone can recompute them. The CLI's atomic swap
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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

TMP_SUFFIX = ".tmp"
MARKER_FILE = "rllib_llm_checkpoint.json"
RNG_FILE = "rllib_llm_rng.json"
#: The RNG file of checkpoints before 2026-12-07 (a pickle: read only from a trusted checkpoint).
LEGACY_RNG_FILE = "rllib_llm_rng.pkl"
#: Files RLlib writes (pickled constructors) that a restore into a built algorithm never reads.
CONSTRUCTOR_FILE = "class_and_ctor_args.pkl"
MARKER_FORMAT = 2


def write_checkpoint(algo: Any, directory: str | Path, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Writes ``algo``'s checkpoint into ``directory`` (RLlib's state, the RNGs, then the marker, each file
    synced) and returns the marker. ``extra`` (JSON-able) is stored in the marker."""
    directory = Path(directory)
    algo.save_to_path(str(directory), use_msgpack=True)
    write_json_atomic(directory / RNG_FILE, capture_rng())
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


#: The msgpack functions and classes ``msgpack_numpy.patch()`` replaces.
_MSGPACK_API = ("Packer", "Unpacker", "load", "loads", "dump", "dumps", "pack", "packb", "unpack", "unpackb")


@contextmanager
def msgpack_unpatched_after() -> Iterator[None]:
    """Puts msgpack's own functions back after the block. RLlib's msgpack checkpoints call
    ``msgpack_numpy.patch()``, which replaces them process-wide, and Ray serializes task arguments and results
    with msgpack: after a save or restore, a numpy array a patched process sends (weights to a remote
    EnvRunner, say) arrives in an unpatched one as msgpack_numpy's raw record, a dict, and the runner died
    loading it (``can't convert np.ndarray of type numpy.bytes_``)."""
    import msgpack

    saved = {name: getattr(msgpack, name) for name in _MSGPACK_API if hasattr(msgpack, name)}
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(msgpack, name, value)


class MsgpackCheckpointable:
    """Mixin for the Checkpointables of this package (the Algorithm, its EnvRunners, its Learner): their
    ``save_to_path`` / ``restore_from_path`` leave msgpack as they found it (:func:`msgpack_unpatched_after`)."""

    def save_to_path(self, *args: Any, **kwargs: Any) -> Any:
        with msgpack_unpatched_after():
            return super().save_to_path(*args, **kwargs)

    def restore_from_path(self, *args: Any, **kwargs: Any) -> None:
        with msgpack_unpatched_after():
            return super().restore_from_path(*args, **kwargs)


#: RLlib's per-component metadata file and the checkpoint root's.
COMPONENT_METADATA, ROOT_METADATA = "metadata.json", "rllib_checkpoint.json"


def read_checkpoint_state(root: str | Path) -> dict[str, Any]:
    """The state a checkpoint directory holds, as ``get_state()`` returned it when it was saved: RLlib's
    layout (``save_to_path``: one directory per component, its metadata naming its state file, the
    component's own state there and each sub-component's in a directory of its own) merged back into one
    dict, for ``set_state``. Read without patching msgpack (``msgpack_numpy.unpackb``); call
    :func:`check_safe_to_load` first: msgpack_numpy unpickles object arrays and a ``.pkl`` is a pickle."""
    import msgpack_numpy

    root = Path(root)
    metadata = root / (ROOT_METADATA if (root / ROOT_METADATA).is_file() else COMPONENT_METADATA)
    stem = json.loads(metadata.read_text()).get("state_file", "state")
    if (root / f"{stem}.msgpack").is_file():
        state = msgpack_numpy.unpackb((root / f"{stem}.msgpack").read_bytes(), strict_map_key=False)
    else:
        with open(root / f"{stem}.pkl", "rb") as f:
            state = pickle.load(f)
    for child in sorted(root.iterdir()):
        if child.is_dir() and (child / COMPONENT_METADATA).is_file():
            state[child.name] = read_checkpoint_state(child)
    return state


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
    """The process-global RNG states (the HF backend samples from torch's global generator), as JSON data."""
    import numpy as np
    import torch

    kind, keys, position, has_gauss, cached = np.random.get_state()
    version, internal, gauss_next = random.getstate()
    state: dict[str, Any] = {
        "python": [version, list(internal), gauss_next],
        "numpy": [kind, [int(k) for k in keys], int(position), int(has_gauss), float(cached)],
        "torch": torch.get_rng_state().tolist(),
    }
    if torch.cuda.is_available():
        state["torch_cuda"] = [s.tolist() for s in torch.cuda.get_rng_state_all()]
    return state


def restore_rng(state: dict[str, Any]) -> None:
    """Sets the RNGs from :func:`capture_rng`'s data (or from the tuples and tensors of a legacy pickle)."""
    import numpy as np
    import torch

    def as_bytes(value: Any) -> torch.Tensor:
        return value if torch.is_tensor(value) else torch.tensor(value, dtype=torch.uint8)

    version, internal, gauss_next = state["python"]
    random.setstate((version, tuple(internal), gauss_next))
    kind, keys, position, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), position, has_gauss, cached))
    torch.set_rng_state(as_bytes(state["torch"]))
    if "torch_cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([as_bytes(s) for s in state["torch_cuda"]])


def read_rng(root: Path, trust: bool = False) -> dict[str, Any] | None:
    """The RNG states a checkpoint directory holds (None without them); the legacy pickle only if trusted
    (:func:`check_safe_to_load` has refused an untrusted one before this is reached)."""
    if (root / RNG_FILE).is_file():
        return json.loads((root / RNG_FILE).read_text())
    if trust and (root / LEGACY_RNG_FILE).is_file():
        with open(root / LEGACY_RNG_FILE, "rb") as f:
            return pickle.load(f)
    return None


class UnsafeCheckpointError(ValueError):
    """A checkpoint whose loading could run code it carries (pickled state), refused unless trusted."""


def _object_array_record(obj: dict) -> bool:
    """Whether a msgpack map is msgpack_numpy's record of an object array (which its decoder unpickles)."""
    return any(obj.get(nd) is True and obj.get(kind) in (b"O", "O") for nd, kind in ((b"nd", b"kind"), ("nd", "kind")))


def plain_msgpack_load(path: Path, object_hook: Any = None) -> Any:
    """One msgpack file's content (a file holding more than one object is an error), decoded by msgpack
    alone. Not ``msgpack.unpack``: RLlib applies
    ``msgpack_numpy.patch()`` process-wide, after which the module's functions decode msgpack_numpy's records,
    unpickling object arrays; the ``Unpacker`` classes of msgpack's own submodules stay unpatched."""
    try:
        from msgpack._cmsgpack import Unpacker
    except ImportError:  # a build without the C extension
        from msgpack.fallback import Unpacker
    with open(path, "rb") as f:
        unpacker = Unpacker(f, raw=False, strict_map_key=False, object_hook=object_hook, max_buffer_size=2**31 - 1)
        content = unpacker.unpack()
        if unpacker.tell() != path.stat().st_size:  # a state file is one object: more is garbage
            raise ValueError(f"{path.stat().st_size - unpacker.tell()} bytes after the first object")
        return content


#: Suffixes of msgpack state files (RLlib reads both).
MSGPACK_SUFFIXES = (".msgpack", ".msgpck")


def loads_pickle(path: Path) -> bool:
    """Whether loading this checkpoint file would unpickle: pickled state (any ``.pkl`` but RLlib's
    constructor files, which a restore does not read), or msgpack holding object-array records. A msgpack
    file is parsed once by plain msgpack (:func:`plain_msgpack_load`: nothing is unpickled) to look; corrupt
    data raises what msgpack raises."""
    if path.suffix == ".pkl":
        return path.name != CONSTRUCTOR_FILE
    if path.suffix not in MSGPACK_SUFFIXES:
        return False
    found: list[bool] = []

    def look(obj: dict) -> dict:
        if _object_array_record(obj):
            found.append(True)
        return obj

    plain_msgpack_load(path, object_hook=look)
    return bool(found)


def unsafe_files(root: Path) -> list[str]:
    """The files of checkpoint ``root`` whose loading could run code (:func:`loads_pickle`); a corrupt file
    counts as safe here (the integrity checks name it, and a loader stops where this scan stopped)."""
    unsafe = []
    for path in sorted(root.rglob("*")):
        try:
            if path.is_file() and loads_pickle(path):
                unsafe.append(path.relative_to(root).as_posix())
        except Exception:
            pass
    return unsafe


def refuse_unsafe(root: Path, unsafe: list[str], trust: bool = False) -> None:
    """Raises :class:`UnsafeCheckpointError` (one line, naming the files) for the files of checkpoint ``root``
    that would unpickle (``unsafe``), unless ``trust``."""
    if unsafe and not trust:
        shown = ", ".join(unsafe[:3]) + (f" and {len(unsafe) - 3} more" if len(unsafe) > 3 else "")
        raise UnsafeCheckpointError(
            f"{root}: {shown} would be unpickled, and unpickling runs any code a file carries: refused. "
            "Pass --trust-checkpoint only for a checkpoint you or someone you trust wrote (checkpoints written "
            "by this version hold no pickled state)."
        )


def check_safe_to_load(root: Path, trust: bool = False) -> None:
    """Raises :class:`UnsafeCheckpointError` (one line, naming the files) if loading checkpoint ``root``
    could run code and ``trust`` is not given."""
    if not trust:
        refuse_unsafe(Path(root), unsafe_files(Path(root)))

"""Resumable training runs: atomic checkpoints, finding the last complete one, continuing a run.

Why this exists: a run killed mid-training (SIGKILL, OOM, a preempted node) must continue from its last
checkpoint with nothing lost or repeated, and a kill *during* a save must never leave a corrupt "last
checkpoint". So a checkpoint is written to ``RUN/checkpoint.tmp``, completed by a marker file written last
(``rllib_llm_checkpoint.json``: the iteration, every file's size and sha256, and what the CLI needs to continue), then
swapped in by two renames (``checkpoint -> checkpoint.old``, ``checkpoint.tmp -> checkpoint``); what goes into
the directory is :func:`rllib_llm.checkpoint_files.write_checkpoint`'s, the same for a Tune trial's checkpoint. A kill at
any point leaves at least one complete checkpoint; :func:`last_checkpoint` finds the newest complete one
and repairs the directory.

What a checkpoint holds: RLlib's own (the LearnerGroup with module weights and optimizer state, the env
runner state with its seed RNG and rollout counter, the metrics logger, ``training_iteration``) plus the
process-global RNGs (``random``, numpy, torch), which the generation backend samples from, so a resumed
run continues the same random stream as an uninterrupted one.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rllib_llm.checkpoint_files import (
    MARKER_FILE,
    MSGPACK_SUFFIXES,
    TMP_SUFFIX,
    fsync_path,
    loads_pickle,
    plain_msgpack_load,
    read_rng,
    refuse_unsafe,
    restore_rng,
    sha256_file,
    write_checkpoint,
)

logger = logging.getLogger(__name__)

CHECKPOINT_NAME = "checkpoint"
OLD_SUFFIX = ".old"
ALGORITHM_STATE_FILE = "algorithm_state"  # .msgpack (this version) or .pkl (RLlib's default, older runs)
COMPONENT_LEARNER_GROUP = "learner_group"
RLLIB_MARKER_FILE = "rllib_checkpoint.json"


class CheckpointError(ValueError):
    """A checkpoint that cannot be restored; the message names the file and what is wrong with it."""


@dataclass
class ResumePoint:
    """A complete checkpoint of a run: where it is, after which iteration, and the CLI's run info."""

    path: Path
    iteration: int
    extra: dict[str, Any] = field(default_factory=dict)


# --- writing ---------------------------------------------------------------------------------------


def save_checkpoint(algo: Any, run_dir: str | Path, extra: dict[str, Any] | None = None) -> Path:
    """Checkpoints ``algo`` to ``run_dir/checkpoint`` atomically and returns that path.

    ``extra`` (JSON-able) is stored in the marker and comes back as :attr:`ResumePoint.extra`.
    """
    run_dir = Path(run_dir).resolve()
    final = run_dir / CHECKPOINT_NAME
    tmp, old = final.with_name(final.name + TMP_SUFFIX), final.with_name(final.name + OLD_SUFFIX)
    shutil.rmtree(tmp, ignore_errors=True)
    write_checkpoint(algo, tmp, extra)
    if final.exists():
        shutil.rmtree(old, ignore_errors=True)
        os.rename(final, old)
    os.rename(tmp, final)
    fsync_path(run_dir)
    shutil.rmtree(old, ignore_errors=True)
    return final


# --- reading and checking --------------------------------------------------------------------------


def _check_file(root: Path, path: Path) -> bool:
    """Cheap structural checks that catch truncated and garbage files without unpickling big states;
    returns whether loading the file would unpickle (:func:`~rllib_llm.checkpoint_files.loads_pickle`, from
    the same single parse of a msgpack file)."""
    name, size = f"{root}: file {path.relative_to(root)}", path.stat().st_size
    if path.suffix == ".json":
        try:
            json.loads(path.read_text())
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise CheckpointError(f"{name} is corrupt: not valid JSON ({e.__class__.__name__})") from None
    elif path.suffix in MSGPACK_SUFFIXES:
        try:
            return loads_pickle(path)
        except Exception as e:  # msgpack raises several kinds for cut and garbage data
            raise CheckpointError(f"{name} is corrupt: not valid msgpack ({e.__class__.__name__})") from None
    elif path.suffix == ".pkl":
        with open(path, "rb") as f:
            head = f.read(1)
            f.seek(max(size - 1, 0))
            tail = f.read(1)
        if head != b"\x80" or tail != b".":  # pickle protocol >= 2 starts with PROTO and ends with STOP
            raise CheckpointError(f"{name} is corrupt: not a complete pickle ({size} bytes)")
    return loads_pickle(path)


def check_checkpoint(path: str | Path, trust: bool = False) -> dict[str, Any] | None:
    """Raises :class:`CheckpointError` naming the first missing or corrupt file, and
    :class:`~rllib_llm.checkpoint_files.UnsafeCheckpointError` for pickled state unless ``trust``; returns the
    marker (None for a checkpoint saved without one, e.g. by ``algo.save_to_path``)."""
    root = Path(path)
    if not root.is_dir():
        raise CheckpointError(f"checkpoint {str(path)!r} is not a directory")
    if not (root / RLLIB_MARKER_FILE).is_file():
        raise CheckpointError(f"{root}: not an RLlib checkpoint ({RLLIB_MARKER_FILE} is missing)")
    marker = None
    if (root / MARKER_FILE).exists():
        try:
            marker = json.loads((root / MARKER_FILE).read_text())
            expected = dict(marker["files"])
            int(marker["training_iteration"])
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as e:
            raise CheckpointError(f"{root}: corrupt file {MARKER_FILE} ({e.__class__.__name__}: {e})") from None
        for rel, size in expected.items():
            file = root / rel
            if not file.is_file():
                raise CheckpointError(f"{root}: file {rel} is missing")
            if file.stat().st_size != size:
                raise CheckpointError(
                    f"{root}: file {rel} is {file.stat().st_size} bytes, {size} when saved (truncated?)"
                )
        for rel, digest in dict(marker.get("sha256") or {}).items():  # markers before format 2 have none
            if sha256_file(root / rel) != digest:
                raise CheckpointError(f"{root}: file {rel} is corrupt: its content changed since it was saved")
    unsafe = [file.relative_to(root).as_posix() for file in sorted(root.rglob("*"))
              if file.is_file() and file.suffix in (".json", ".pkl", *MSGPACK_SUFFIXES) and _check_file(root, file)]
    if marker is None:
        _check_layout(root)
    refuse_unsafe(root, unsafe, trust)
    return marker


def _check_layout(root: Path) -> None:
    """For a checkpoint without our marker: RLlib's layout, every component directory (one with a metadata
    file) with its class file and the state file its metadata names (a missing learner state would
    otherwise restore random weights without a word)."""
    if not (root / COMPONENT_LEARNER_GROUP).is_dir():
        raise CheckpointError(f"{root}: directory {COMPONENT_LEARNER_GROUP}/ is missing")
    for meta in [root / RLLIB_MARKER_FILE, *sorted(root.rglob("metadata.json"))]:
        prefix = meta.parent.relative_to(root).as_posix() + "/"
        prefix = "" if prefix == "./" else prefix
        metadata = json.loads(meta.read_text())
        wanted = [metadata.get("class_and_ctor_args_file", "class_and_ctor_args.pkl")]
        stem = metadata.get("state_file")
        if stem and not (meta.parent / f"{stem}.pkl").is_file():  # msgpack (this version's) or pickle
            wanted.append(f"{stem}.msgpack")
        for name in wanted:
            if not (meta.parent / name).is_file():
                raise CheckpointError(f"{root}: file {prefix}{name} is missing")


def _iteration_without_marker(root: Path) -> int:
    """``training_iteration`` from the Algorithm's own state file: msgpack read plainly (no decoder hooks), a
    pickle only from a checkpoint :func:`check_checkpoint` let through as trusted."""
    state_file = root / f"{ALGORITHM_STATE_FILE}.msgpack"
    if state_file.is_file():
        return int(plain_msgpack_load(state_file).get("training_iteration", 0))
    with open(root / f"{ALGORITHM_STATE_FILE}.pkl", "rb") as f:
        return int(pickle.load(f).get("training_iteration", 0))


def read_checkpoint(path: str | Path, trust: bool = False) -> ResumePoint:
    """The checked :class:`ResumePoint` of one checkpoint directory (raises :class:`CheckpointError`, and
    refuses pickled state unless ``trust``)."""
    root = Path(path).resolve()
    marker = check_checkpoint(root, trust)
    if marker is None:
        try:
            return ResumePoint(root, _iteration_without_marker(root))
        except Exception as e:
            name = next((f"{ALGORITHM_STATE_FILE}{suffix}" for suffix in (".msgpack", ".pkl")
                         if (root / f"{ALGORITHM_STATE_FILE}{suffix}").is_file()), ALGORITHM_STATE_FILE)  # fmt: skip
            raise CheckpointError(f"{root}: corrupt file {name} ({e.__class__.__name__})") from None
    return ResumePoint(root, int(marker["training_iteration"]), dict(marker.get("extra") or {}))


def last_checkpoint(run_dir: str | Path, repair: bool = True, trust: bool = False) -> ResumePoint | None:
    """The newest complete checkpoint of a run (None if there is none).

    A kill during :func:`save_checkpoint` can leave ``checkpoint.tmp`` (complete or not) and
    ``checkpoint.old``; with ``repair`` the newest complete one becomes ``checkpoint`` and the rest is removed.
    Only ``checkpoint/`` itself may lack the marker (a checkpoint saved by ``algo.save_to_path``): a ``.tmp``
    or ``.old`` copy without it is a save that did not finish, and a verified checkpoint (marker, sizes and
    hashes checked) is always preferred over one without a marker, whatever their iterations.
    """
    run_dir = Path(run_dir).resolve()
    final = run_dir / CHECKPOINT_NAME
    candidates = [final, final.with_name(final.name + TMP_SUFFIX), final.with_name(final.name + OLD_SUFFIX)]
    complete: list[ResumePoint] = []
    for path in candidates:
        if not path.exists():
            continue
        if path != final and not (path / MARKER_FILE).is_file():
            logger.warning("Ignoring %s: the save that wrote it did not finish (no %s).", path, MARKER_FILE)
            continue
        try:
            complete.append(read_checkpoint(path, trust))
        except CheckpointError as e:
            logger.warning("Ignoring incomplete checkpoint: %s", e)
    if not complete:
        return None
    verified = [p for p in complete if (p.path / MARKER_FILE).is_file()] or complete
    best = max(verified, key=lambda p: p.iteration)  # max() keeps the first of equals: checkpoint/ wins ties
    if repair:
        if best.path != final:
            shutil.rmtree(final, ignore_errors=True)
            os.rename(best.path, final)
            fsync_path(run_dir)
            best = ResumePoint(final, best.iteration, best.extra)
        for path in candidates[1:]:
            shutil.rmtree(path, ignore_errors=True)
    return best


def restore(algo: Any, point: ResumePoint, trust: bool = False) -> None:
    """Restores ``algo`` (built from the run's config) to ``point``: weights, optimizer, env runner RNG and
    counters, metrics, iteration, and the process-global RNGs. ``point`` came from :func:`read_checkpoint`,
    which refused pickled state unless ``trust``; RLlib's restore into a built algorithm reads the state
    files only (never the pickled constructors)."""
    try:
        algo.restore_from_path(str(point.path))
    except Exception as e:  # e.g. a checkpoint of another model or algorithm: one line, not Ray's traceback
        message = " ".join(str(e).split())[:300]
        raise CheckpointError(
            f"{point.path}: could not restore it into this run's algorithm (written by another config?): "
            f"{type(e).__name__}: {message}"
        ) from e
    rng = read_rng(point.path, trust)
    if rng is not None:
        restore_rng(rng)
    if int(algo.iteration) != point.iteration:
        raise CheckpointError(
            f"{point.path}: restored training iteration {algo.iteration}, the checkpoint says {point.iteration}"
        )


# --- the run's JSON-lines files ----------------------------------------------------------------------


class ProgressError(ValueError):
    """A row of a run's ``progress.jsonl`` before its checkpoint that is not what the run wrote."""


def _progress_row_problem(row: Any, expected: int) -> str | None:
    """Why ``row`` is not the progress row of iteration ``expected`` (None if it is): an object whose
    ``iter`` is that integer (written as 1 or 1.0) and whose other values are numbers or null."""
    if not isinstance(row, dict):
        return "not a JSON object"
    it = row.get("iter")
    if isinstance(it, bool) or not isinstance(it, (int, float)) or it != int(it):
        return f"'iter' is {it!r}, not an integer"
    if int(it) != expected:
        return f"'iter' is {int(it)} where iteration {expected} was due (a repeated, skipped or reordered row)"
    bad = [k for k, v in row.items() if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)))]
    return f"non-numeric value(s) for {', '.join(bad[:3])}" if bad else None


def truncate_jsonl(path: str | Path, key: str, last: int, progress: bool = False) -> int:
    """Drops the rows of ``path`` whose ``key`` is beyond ``last`` (written after the checkpoint a run
    resumes from, so they would repeat) and a torn last line; returns how many rows were dropped. Read
    and rewritten line by line: memory does not grow with the file.

    With ``progress`` (``progress.jsonl``: one row per iteration), the rows up to ``last`` must be
    iterations 1, 2, ... in order with numeric values: anything else there (a repeated row from two
    writers, ``iter: -7`` or ``"1"``, a text metric) is a :class:`ProgressError` naming the line, since
    no repair would know which of the rows is true."""
    path = Path(path)
    if not path.is_file():
        return 0
    tmp = path.with_name(path.name + TMP_SUFFIX)
    dropped, expected = 0, 1
    with open(path, encoding="utf-8", errors="replace") as source, open(tmp, "w", encoding="utf-8") as kept:
        for number, line in enumerate(source, start=1):
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                row = None  # a line cut by the kill (or beyond repair: see below)
            try:
                keep = float(row[key]) <= last
            except (KeyError, TypeError, ValueError, IndexError):
                keep = False
            if progress and line.strip() and (keep or not isinstance(row, dict)):
                problem = _progress_row_problem(row, expected) if row is not None else "not a JSON row"
                if problem is not None and not (row is None and expected > last):
                    kept.close()
                    tmp.unlink()
                    raise ProgressError(f"{path} line {number}: {problem}; this run's rows are not what it wrote. "
                                        "Fix or remove the file to resume.")
                expected += 1
            if keep:
                kept.write(line if line.endswith("\n") else line + "\n")
            elif line.strip():
                dropped += 1
    if dropped:
        os.replace(tmp, path)
    else:
        tmp.unlink()
    return dropped


def resume_run(
    run_dir: str | Path, jsonl_keys: dict[str, str], progress: tuple[str, ...] = (), trust: bool = False
) -> ResumePoint | None:
    """What ``rllib-llm train --resume`` does before building the algorithm: finds (and repairs) the last
    complete checkpoint of ``run_dir`` and drops the rows of its JSON-lines files (``name -> iteration
    key``) written after it, so the resumed run's rows continue without a gap or repeat (``progress``: the
    files of one row per iteration, checked as :func:`truncate_jsonl` says). Without a
    checkpoint the run starts from scratch (and every row goes); a corrupt ``checkpoint/`` with nothing
    complete to fall back on is a :class:`CheckpointError` rather than a silent restart."""
    run_dir = Path(run_dir)
    point = last_checkpoint(run_dir, trust=trust)
    if point is None and (run_dir / CHECKPOINT_NAME).exists():
        read_checkpoint(run_dir / CHECKPOINT_NAME, trust)  # raises, naming what is wrong: never restart silently
    last = point.iteration if point is not None else 0
    dropped = sum(truncate_jsonl(run_dir / name, key, last, progress=name in progress)
                  for name, key in jsonl_keys.items())
    note = f" (dropped {dropped} row(s) written after it)" if dropped else ""
    if point is None:
        print(f"No complete checkpoint in {run_dir}: starting from scratch{note}.", flush=True)
    else:
        print(f"Resuming from {point.path} after iteration {point.iteration}{note}.", flush=True)
    return point


#: What the CLI keeps in a checkpoint's marker to continue a run: the untrained policy's evaluation (a
#: resumed run cannot redo it) and the trackers' run ids.
RUN_INFO_KEYS = ("before", "tracking")


def run_info(summary: dict[str, Any]) -> dict[str, Any]:
    return {key: summary[key] for key in RUN_INFO_KEYS if key in summary}

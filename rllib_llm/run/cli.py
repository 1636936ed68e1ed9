"""``rllib-llm``: train a tuned example, evaluate a checkpoint, plot runs, read trajectories, try an API model.

    rllib-llm train tuned_examples/numberline_gigpo.py [--iterations N] [--output DIR] [--tracking-uri URI]
    python tuned_examples/numberline_gigpo.py [same options]      (the example's __main__ calls run_example)
    rllib-llm evaluate DIR/checkpoint --example EXAMPLE.py [--num-seeds N]
    rllib-llm plot DIR [DIR ...]                                  (PNG learning curves from progress.jsonl)
    rllib-llm show-trajectory DIR [--iteration N]                 (sampled trajectories as text)
    rllib-llm prompt-agent --env NumberLine --base-url URL --model NAME [--episodes N]

A tuned example is a Python file exposing ``config`` (an LLMConfig) and optionally ``stop``
(``{"training_iteration": N}``, plus any result entry as a threshold, e.g. ``"time_total_s": 600`` or
``"env_runners/success_rate": 0.9``; see :mod:`rllib_llm.run.stopping`), as RLlib's tuned examples do. A training run writes ``DIR/checkpoint``,
``progress.jsonl``, ``trajectories.jsonl`` and ``summary.json``, and logs params, metrics and the
checkpoint to MLflow (``./mlruns`` unless ``--tracking-uri``; ``--no-tracking`` turns it off).
"""

from __future__ import annotations

import argparse
import ast
import difflib
import errno
import importlib.util
import inspect
import json
import logging
import math
import os
import re
import shutil
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from rllib_llm.metrics import ENV_RUNNERS, EPISODE_RETURN_MEAN
from rllib_llm.run.checkpoints import (
    CheckpointError,
    ResumePoint,
    read_checkpoint,
    restore,
    resume_run,
    run_info,
    save_checkpoint,
)
from rllib_llm.run.overrides import apply_overrides, describe_settable
from rllib_llm.run.progress import (
    episode_record,
    flatten_metrics,
    format_row,
    format_trajectory,
    header,
    printed_columns,
    progress_row,
    row_values,
    table_columns,
)
from rllib_llm.run.quiet import quiet_third_party_notices
from rllib_llm.run.stopping import ITERATIONS, check_stop, learning_criteria, reached_criterion
from rllib_llm.run.trajectory_recorder import record_trajectories

logger = logging.getLogger("rllib_llm")

PROGRESS_FILE = "progress.jsonl"
#: The result ``--stop-reward`` stops on (RLlib's name for the mean episode return of the sampled episodes).
STOP_REWARD_KEY = f"{ENV_RUNNERS}/{EPISODE_RETURN_MEAN}"
TRAJECTORIES_FILE = "trajectories.jsonl"
SUMMARY_FILE = "summary.json"
#: ``--checkpoint-every``'s default: a killed run loses at most this many iterations (a main-job save, 0.3 s,
#: costs 0.3% of that time: benchmarks/results/checkpoint_cost.md).
DEFAULT_CHECKPOINT_EVERY = 8
#: ``--gpu``: episode groups per iteration (x the example's group size) and rows per forward/backward pass of
#: the GPU-sized run (the README's and the tuned examples' GPU numbers were measured at this size).
GPU_NUM_GROUPS = 8
#: ``--gpu``'s least episodes per iteration (groups of 2 get 16 groups, groups of 4 get 8).
GPU_NUM_EPISODES = 32
GPU_MICRO_BATCH_SIZE = 8


class UserError(Exception):
    """A problem with what the user asked for: printed as one line, no traceback."""


def one_line(message: str) -> str:
    """A multi-line message (e.g. LLMConfig.validate's bullet list) as one line: ``head: a; b``."""
    lines = [line.strip().removeprefix("- ") for line in str(message).splitlines() if line.strip()]
    if len(lines) <= 1:
        return lines[0] if lines else ""
    head, rest = lines[0], lines[1:]
    return f"{head.rstrip(':')}: {'; '.join(rest)}"


# --- tuned examples ------------------------------------------------------------------------------------


def _config_class_of(error: BaseException, class_name: str) -> type | None:
    """The config class whose method rejected a keyword: the type of the config being built when the
    error passed through one of its methods (LLMConfig.training forwards unknown keywords to RLlib's
    AlgorithmConfig.training), else the LLMConfig subclass or ancestor named in the message."""
    from rllib_llm.algorithms.config import LLMConfig

    for frame, _ in traceback.walk_tb(error.__traceback__):
        owner = frame.f_locals.get("self")
        if isinstance(owner, LLMConfig):
            return type(owner)
    found, todo = [], [LLMConfig]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return next((c for c in found + list(LLMConfig.__mro__) if c.__name__ == class_name), None)


#: RLlib fields an LLM user sets through our builder methods; the other RLlib ones are counted, not listed.
COMMON_RLLIB_FIELDS = frozenset({
    "lr", "gamma", "grad_clip", "grad_clip_by", "minibatch_size", "num_epochs", "train_batch_size_per_learner",
    "learner_connector", "num_env_runners", "num_learners", "num_gpus_per_learner", "seed", "env_config",
    "evaluation_interval", "evaluation_num_env_runners", "optimizer_config",
})


def _allowed_keywords(cls: type, method: str) -> tuple[list[str], list[str]]:
    """The keyword arguments ``cls.method`` accepts, over the MRO (each override may forward the rest):
    (those rllib-llm's classes declare, those only RLlib's declare)."""
    own: set[str] = set()
    rllib: set[str] = set()
    for klass in cls.__mro__:
        function = klass.__dict__.get(method)
        if function is not None:
            names = own if klass.__module__.startswith("rllib_llm") else rllib
            for p in inspect.signature(function).parameters.values():
                if p.name != "self" and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD):
                    names.add(p.name)
    return sorted(own), sorted(rllib - own)


def _describe_allowed(method: str, own: list[str], rllib: list[str]) -> str:
    """Our fields, then RLlib's common ones, with how many other RLlib fields the method also takes."""
    if not rllib:
        return ", ".join(own)
    common = [name for name in rllib if name in COMMON_RLLIB_FIELDS]
    rest = len(rllib) - len(common)
    more = f" and {rest} more of RLlib's AlgorithmConfig.{method}()" if rest else ""
    return f"{', '.join(own)}; RLlib's: {', '.join(common)}{more}"


def describe_config_error(error: BaseException) -> str:
    """One line for an error raised while building a config; an unknown keyword of a builder method gets
    the allowed ones and the closest match."""
    message = one_line(str(error))
    match = re.search(r"(\w+)\.(\w+)\(\) got an unexpected keyword argument '(\w+)'", message)
    cls = _config_class_of(error, match.group(1)) if match else None
    if match and cls is not None and hasattr(cls, match.group(2)):
        _, method, name = match.groups()
        own, rllib = _allowed_keywords(cls, method)
        close = difflib.get_close_matches(name, own + rllib, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return f"unknown field {name!r} in .{method}(){hint}; allowed: {_describe_allowed(method, own, rllib)}"
    return message if isinstance(error, ValueError) else f"{type(error).__name__}: {message}"


def _line_in(error: BaseException, file: Path) -> str:
    """``:LINE`` of the innermost frame of ``error`` in ``file`` (where the user's config went wrong); for an
    unknown keyword, the line of that keyword (a chained config call spans many lines and its frame points at
    the first)."""
    target = str(file.resolve())
    frames = [frame for frame in traceback.extract_tb(error.__traceback__) if frame.filename == target]
    if not frames:
        return ""
    frame = frames[-1]
    match = re.search(r"unexpected keyword argument '(\w+)'", str(error))
    if match:
        try:
            tree = ast.parse(file.read_text())
        except (OSError, SyntaxError):
            return f":{frame.lineno}"
        end = frame.end_lineno or frame.lineno
        lines = [node.lineno for node in ast.walk(tree)
                 if isinstance(node, ast.keyword) and node.arg == match.group(1) and frame.lineno <= node.lineno <= end]
        if lines:
            return f":{min(lines)}"
    return f":{frame.lineno}"


def load_tuned_example(path: str | Path) -> tuple[Any, dict]:
    """The ``config`` and ``stop`` of a tuned-example file; an error while building it is one line
    naming the file and line (``RLLIB_LLM_TRACEBACK=1`` shows the traceback instead)."""
    file = Path(path)
    if not file.is_file():
        raise UserError(f"Tuned example {str(path)!r} not found.")
    spec = importlib.util.spec_from_file_location(f"tuned_example_{file.stem}", file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        if os.environ.get("RLLIB_LLM_TRACEBACK"):
            raise
        raise UserError(f"{path}{_line_in(e, file)}: {describe_config_error(e)}") from e
    if not hasattr(module, "config"):
        raise UserError(f"{path} defines no `config` (an LLMConfig).")
    # The module is not importable by name in Ray workers (remote EnvRunners, Tune trials): ship its
    # functions (e.g. an env_to_module_connector lambda) by value.
    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(module)
    return module.config, dict(getattr(module, "stop", {}) or {})


def validate_config(config: Any, source: str) -> None:
    """``config.validate()`` before Ray starts, its errors (each naming the field and what is allowed) in
    one line."""
    try:
        config.validate()
    except (ValueError, TypeError) as e:
        raise UserError(f"{source}: {describe_config_error(e)}") from e


# --- training ------------------------------------------------------------------------------------------


def init_ray() -> None:
    """Joins the cluster of ``ray job submit`` (``RAY_ADDRESS`` is set there) or one started on this machine by
    ``ray start --head``, else starts a local Ray."""
    import ray

    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    if os.environ.get("RAY_ADDRESS"):
        ray.init(configure_logging=False)
        return
    try:
        ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False, configure_logging=False)
    except ValueError as e:
        # A cluster started here by `ray start --head` is joined by ray.init(), which then refuses num_cpus:
        # run on that cluster, as ray.init() would without our settings.
        if "existing cluster" not in str(e):
            raise
        ray.init(configure_logging=False)


def interactive() -> bool:
    """Both output streams are terminals (no redirection to a file or a pipe)."""
    return sys.stdout.isatty() and sys.stderr.isatty()


def format_eval(name: str, stats: dict[str, Any]) -> str:
    return (
        f"{name}: success rate {stats['success_rate']:.3f}, valid-action rate {stats['valid_action_rate']:.3f}, "
        f"mean return {stats['episode_return_mean']:.3f} over {stats['num_episodes']} held-out seeds"
    )


def _resumed_mlflow_run(resumed: ResumePoint | None) -> str | None:
    """The MLflow run id the checkpointed run logged to (stored in its checkpoint marker), if any."""
    for tracker in (resumed.extra.get("tracking") or []) if resumed is not None else []:
        if isinstance(tracker, dict) and tracker.get("tracker") == "mlflow" and tracker.get("run_id"):
            return str(tracker["run_id"])
    return None


def _tracking_for(
    args: argparse.Namespace, config: Any, name: str, source: str, output: Path, resumed: ResumePoint | None = None
):
    from rllib_llm.run.tracking import RUN_DIR_TAG, Tracking, TrackingError, config_params, start_tracking

    if args.no_tracking and not args.wandb_project:
        return Tracking()
    try:
        tracking = start_tracking(
            mlflow=not args.no_tracking,
            tracking_uri=args.tracking_uri,
            experiment=args.experiment or name,
            run_name=args.run_name or f"{output.name}-{time.strftime('%Y%m%d-%H%M%S')}",
            wandb_project=args.wandb_project,
            wandb_entity=args.wandb_entity,
            directory=output,
            tags={"tuned_example": source, RUN_DIR_TAG: str(output.resolve())},
            mlflow_run_id=_resumed_mlflow_run(resumed),
            resume=bool(args.resume),
        )
    except TrackingError as e:
        raise UserError(str(e)) from e
    tracking.log_params(config_params(config))
    for line in tracking.describe():
        print(f"Tracking: {line}", flush=True)
    return tracking


def at_gpu_size(config: Any) -> Any:
    """The tuned example at GPU size (``rllib-llm train EXAMPLE --gpu``): the Learner and the EnvRunner on one
    GPU (the EnvRunner samples in the driver unless the example has remote ones, which then share the GPU),
    at least :data:`GPU_NUM_GROUPS` episode groups and :data:`GPU_NUM_EPISODES` episodes per iteration (more
    groups, the example's group size), micro-batches of at least
    :data:`GPU_MICRO_BATCH_SIZE` rows (the CPU examples keep them small for memory). Everything else is the
    example's."""
    runners = max(config.num_env_runners, 1)
    config.learners(num_gpus_per_learner=1 if config.num_env_runners == 0 else 0.5)
    config.env_runners(num_gpus_per_env_runner=1 if config.num_env_runners == 0 else 0.5 / runners)
    if getattr(config, "num_groups", None) is not None:
        groups = max(GPU_NUM_GROUPS, math.ceil(GPU_NUM_EPISODES / config.group_size))
        if config.num_groups < groups:
            config.group_rollouts(num_groups=groups)
    if config.micro_batch_size is not None and config.micro_batch_size < GPU_MICRO_BATCH_SIZE:
        config.training(micro_batch_size=GPU_MICRO_BATCH_SIZE)
    return config


def with_model(config: Any, name_or_path: str) -> Any:
    """``--model``: the example's model spec with another model (``gguf_file`` dropped: a .gguf path names
    its file itself), every other field (LoRA, dtype, trainable layers) kept."""
    return config.llm(model={**config.llm_model, "name_or_path": name_or_path, "gguf_file": None})


def train_config(config: Any, stop: dict, args: argparse.Namespace, *, name: str, source: str) -> dict[str, Any]:
    """The training run behind ``rllib-llm train`` and ``python tuned_examples/x.py``."""
    quiet_third_party_notices()
    try:
        stop = check_stop(stop)
    except ValueError as e:
        raise UserError(f"{source}: {e}") from e
    if getattr(args, "time_budget_s", None):
        stop["time_total_s"] = float(args.time_budget_s)
    if getattr(args, "stop_reward", None) is not None:
        stop[STOP_REWARD_KEY] = float(args.stop_reward)
    as_test = getattr(args, "as_test", False)
    if as_test and not learning_criteria(stop):
        raise UserError(f"--as-test needs a result the run must reach: {source}'s stop has none "
                        f"({', '.join(stop) or 'empty'}); add --stop-reward R")
    iterations = args.iterations or int(stop.get(ITERATIONS, 10))
    if args.eval_seeds:
        config.evaluation(evaluation_num_seeds=args.eval_seeds)
    if getattr(args, "seed", None) is not None:
        config.debugging(seed=args.seed)
    if getattr(args, "model", None):
        with_model(config, args.model)
    if getattr(args, "gpu", False):
        at_gpu_size(config)
    overrides = [f"{method}.{name}={value}" for method, name, value in (
        ("env_runners", "num_env_runners", getattr(args, "num_env_runners", None)),
        ("learners", "num_learners", getattr(args, "num_learners", None))) if value is not None]
    overrides += getattr(args, "overrides", None) or []
    apply_overrides(config, [o for o in overrides if o != "list"])
    if "list" in overrides:
        print(describe_settable(config))
        return {"listed": True}
    validate_config(config, source)
    output = Path(args.output or Path("runs") / name)
    lock = prepare_run_folder(output, resume=args.resume, overwrite=getattr(args, "overwrite", False))
    status = "FAILED"
    algo = tracking = previous_sigterm = None
    try:
        resumed = None
        if args.resume:
            resumed = resume_run(output, {PROGRESS_FILE: "iter", TRAJECTORIES_FILE: "iteration"},
                                 progress=(PROGRESS_FILE,), trust=getattr(args, "trust_checkpoint", False))  # fmt: skip
        tracking = _tracking_for(args, config, name, source, output, resumed)
        record_trajectories(config, output / TRAJECTORIES_FILE, args.trajectories_per_iter)
        init_ray()
        # After Ray is up: ray.init() installs a SIGTERM handler of its own (an abort with a C++ stack dump).
        previous_sigterm = _raise_on_sigterm()
        algo = config.build_algo()
        if resumed is not None:
            restore(algo, resumed, trust=getattr(args, "trust_checkpoint", False))
        summary = _train_loop(algo, args, iterations, output, tracking, source, resumed, stop)
        status = "FINISHED"
        if as_test and "learning_criterion_reached" not in summary:
            criteria = ", ".join(f"{k} >= {v:g}" for k, v in learning_criteria(stop).items())
            raise LearningNotAchieved(f"--as-test: {criteria} not reached (stopped {summary['stopped']})")
        return summary
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (`ray job stop`, a scheduler's preemption): see below
        status = "KILLED"
        raise
    except OSError as e:  # the run folder made unwritable, a full disk: one line, not pyarrow's traceback
        if not is_write_failure(e):
            raise
        raise UserError(f"Cannot write the run in {output}: {one_line(str(e))}") from None
    finally:
        if tracking is not None:
            tracking.finish(status)
        if algo is not None:
            algo.stop()
        if previous_sigterm is not None:
            signal.signal(signal.SIGTERM, previous_sigterm)
        lock.close()


#: What a file system says when a run cannot write its folder (errno, or the text pyarrow's errors carry).
_WRITE_FAILURES = {errno.EACCES: "Permission denied", errno.EPERM: "Operation not permitted",
                   errno.ENOSPC: "No space left", errno.EROFS: "Read-only file system", errno.EDQUOT: "Disk quota"}


def is_write_failure(error: OSError) -> bool:
    """Whether ``error`` says a file could not be written for lack of permission or space."""
    return error.errno in _WRITE_FAILURES or any(text in str(error) for text in _WRITE_FAILURES.values())


def interrupted_status(error: KeyboardInterrupt, prog: str) -> int:
    """One line for a run stopped by SIGTERM (143) or Ctrl-C (130), instead of a traceback."""
    if isinstance(error, Terminated):
        print(f"{prog}: terminated (SIGTERM): --resume continues from the last checkpoint", file=sys.stderr)
        return 128 + signal.SIGTERM
    print(f"{prog}: interrupted (Ctrl-C): --resume continues from the last checkpoint", file=sys.stderr)
    return 128 + signal.SIGINT


class LearningNotAchieved(Exception):
    """``--as-test``: the run ended without reaching its stop criteria (exit status 1, as RLlib's example
    scripts fail their ``check_learning_achieved``)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM during training: unwinds like Ctrl-C, so the trackers close the run as KILLED."""


def _raise_on_sigterm() -> Any:
    """Turns SIGTERM into :class:`Terminated` (main thread only); returns the handler it replaced, or None."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None

    def terminate(signum: int, frame: Any) -> None:
        raise Terminated(f"signal {signum}")

    return signal.signal(signal.SIGTERM, terminate)


#: What a run writes into its folder (the checkpoint with its in-flight and previous copies).
RUN_FILES = (PROGRESS_FILE, TRAJECTORIES_FILE, SUMMARY_FILE, "checkpoint", "checkpoint.tmp", "checkpoint.old")
#: Written into every run folder when the run starts: what ``--overwrite`` requires before deleting anything.
RUN_MARKER = ".rllib-llm-run"
#: The run folder's lock file (an advisory ``flock``, held for the whole run, with the holder's pid).
RUN_LOCK = ".rllib-llm.lock"


def lock_run_folder(output: Path) -> Any:
    """Takes the run folder's advisory lock (``flock``, non-blocking) and returns the open lock file, which
    holds it until closed or the process ends (a killed run's lock goes with it: nothing stale to clean up).
    A second run into the same folder (two ``--resume`` at once interleaved their rows) gets one line naming
    the holder's pid."""
    import fcntl

    output.mkdir(parents=True, exist_ok=True)
    handle = open(output / RUN_LOCK, "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.seek(0)
        holder = handle.read().strip() or "unknown"
        handle.close()
        raise UserError(f"Run folder {output} is in use by another run (process {holder}): wait for it to end, "
                        "or pick another --output.") from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle


def _holds_data(path: Path) -> bool:
    """Whether a run file exists with something in it (a run killed before its first row leaves an empty
    progress file, which blocked the rerun)."""
    return path.is_dir() or (path.is_file() and path.stat().st_size > 0)


def _written_by_a_run(output: Path) -> bool:
    """Whether ``output`` is an rllib-llm run folder: its marker or lock file (a run killed between taking the
    lock and writing the marker), or (folders of runs from before the marker) a progress file whose first row
    is one of ours."""
    if (output / RUN_MARKER).is_file() or (output / RUN_LOCK).is_file():
        return True
    try:
        with open(output / PROGRESS_FILE, encoding="utf-8") as f:
            first = json.loads(f.readline())
        return isinstance(first, dict) and "iter" in first and "wall_time" in first
    except (OSError, ValueError):
        return False


def prepare_run_folder(output: Path, *, resume: bool, overwrite: bool) -> Any:
    """Creates the run folder and takes its lock (:func:`lock_run_folder`; returned, held until closed); a
    folder that already holds a run is continued (``--resume``), replaced (``--overwrite``: only the run's own
    files go, and only from a folder an rllib-llm run wrote) or refused, never mixed with a new run's rows."""
    if resume and overwrite:
        raise UserError("--resume continues the run in the output folder and --overwrite replaces it: pass one.")
    if output.exists() and not output.is_dir():
        raise UserError(f"--output {output} is a file, not a folder: pick a folder for the run.")
    if resume and not output.exists():
        raise UserError(f"--resume: {output} does not exist (a mistyped --output?): check the folder, or drop "
                        "--resume to start a run there.")
    # Looked at before this run's lock file exists; an empty folder (a run killed right after making it) has
    # nothing to lose either.
    ours = output.is_dir() and (_written_by_a_run(output) or not any(output.iterdir()))
    try:
        lock = lock_run_folder(output)
    except PermissionError as e:
        raise UserError(f"Cannot write the run folder {output}: {e.strerror}.") from None
    try:
        existing = [name for name in RUN_FILES if _holds_data(output / name)]
        if resume and not existing and not ours:
            raise UserError(f"--resume: {output} holds no run to continue (a mistyped --output?): check the folder, "
                            "or drop --resume to start a run there.")
        if existing and not resume:
            if not overwrite:
                raise UserError(
                    f"Run folder {output} already holds a run ({', '.join(existing)}): pass --resume to continue "
                    "it, --overwrite to replace it, or --output for another folder."
                )
            if not ours:
                raise UserError(f"--overwrite: {output} holds {', '.join(existing)} but no rllib-llm run wrote it "
                                f"(no {RUN_MARKER} marker): nothing deleted; pick another --output.")
            for name in existing:
                path = output / name
                if path.is_dir():
                    shutil.rmtree(path)
                else:
                    path.unlink()
            print(f"Replacing the run in {output} (--overwrite).", flush=True)
        (output / RUN_MARKER).write_text(json.dumps({"created_by": "rllib-llm", "pid": os.getpid()}) + "\n")
    except BaseException:
        lock.close()
        raise
    return lock


def _train_loop(
    algo: Any,
    args: argparse.Namespace,
    iterations: int,
    output: Path,
    tracking: Any,
    source: str,
    resumed: ResumePoint | None = None,
    stop: dict[str, float] | None = None,
):
    from tqdm import tqdm

    summary: dict[str, Any] = {"tuned_example": source, "iterations": iterations}
    summary["tracking"] = [
        {"tracker": t.name, "run_id": getattr(t, "run_id", None), "uri": getattr(t, "tracking_uri", None)}
        for t in tracking.trackers
    ]
    start = int(algo.iteration)
    if resumed is not None:  # the untrained policy was evaluated by the run that wrote the checkpoint
        summary.update({k: v for k, v in resumed.extra.items() if k == "before"})
    elif not args.no_eval:
        print(f"Evaluating the untrained policy on {algo.config.evaluation_num_seeds} held-out seeds...", flush=True)
        summary["before"] = algo.evaluate_seeds()
        print(format_eval("Untrained policy", summary["before"]), flush=True)
        tracking.log_metrics({f"eval/before_{k}": float(v) for k, v in summary["before"].items()}, step=0)
    checkpoint_dir = (output / "checkpoint").resolve()
    columns = None  # the table's columns: fixed by the first result (multi-agent runs add per-agent ones)
    # The bar only on a terminal: in a log file its carriage returns would land on the table's lines.
    bar = tqdm(range(start, iterations), initial=start, total=iterations, desc="training", unit="iter",
               file=sys.stderr, dynamic_ncols=True, disable=not interactive())
    with open(output / PROGRESS_FILE, "a") as progress:
        for i in bar:
            result = algo.train()
            if columns is None:
                columns = printed_columns(table_columns(result))
                tqdm.write(header(columns), file=sys.stdout)
            values, metrics = row_values(result), flatten_metrics(result)
            tqdm.write(format_row(values, columns), file=sys.stdout)
            sys.stdout.flush()
            progress.write(json.dumps(progress_row(values, metrics, time.time())) + "\n")
            progress.flush()
            tracking.log_metrics(metrics, step=i + 1)
            bar.set_postfix(success=f"{values['success']:.2f}", valid=f"{values['valid']:.2f}")
            try:
                reached = reached_criterion(stop or {}, result)
            except ValueError as e:
                raise UserError(f"{source}: {e}") from e
            if reached is not None:
                key, reason = reached
                summary["stopped"] = f"after iteration {i + 1}: {reason}"
                if key in learning_criteria(stop or {}):
                    summary["learning_criterion_reached"] = key
                tqdm.write(f"Stopping {summary['stopped']}", file=sys.stdout)
                break
            if args.checkpoint_every and (i + 1) % args.checkpoint_every == 0 and i + 1 < iterations:
                save_checkpoint(algo, output, run_info(summary))
                if args.log_checkpoints == "all":
                    tracking.log_artifact(checkpoint_dir, f"checkpoint_{i + 1:06d}")
    bar.close()
    summary["iterations_done"] = int(algo.iteration)
    summary.setdefault("stopped", f"after iteration {summary['iterations_done']}: the iteration limit ({iterations})")
    checkpoint = save_checkpoint(algo, output, run_info(summary))
    summary["checkpoint"] = str(checkpoint)
    print(f"Checkpoint saved to {checkpoint}", flush=True)
    if args.log_checkpoints != "none":
        tracking.log_artifact(checkpoint_dir, "checkpoint")
    if not args.no_eval:
        print(f"Evaluating the trained policy on {algo.config.evaluation_num_seeds} held-out seeds...", flush=True)
        summary["after"] = algo.evaluate_seeds()
        if "before" in summary:
            print(format_eval("Untrained policy", summary["before"]))
        print(format_eval("Trained policy  ", summary["after"]), flush=True)
        tracking.log_metrics(
            {f"eval/after_{k}": float(v) for k, v in summary["after"].items()}, step=summary["iterations_done"]
        )
    (output / SUMMARY_FILE).write_text(json.dumps(summary, indent=2))
    for file in (PROGRESS_FILE, TRAJECTORIES_FILE, SUMMARY_FILE):
        tracking.log_artifact(output / file)
    return summary


def train(args: argparse.Namespace) -> dict[str, Any]:
    config, stop = load_tuned_example(args.tuned_example)
    return train_config(config, stop, args, name=Path(args.tuned_example).stem, source=args.tuned_example)


def run_example(config: Any, stop: dict | None = None, argv: list[str] | None = None, source: str | None = None):
    """``python tuned_examples/x.py [train options]``: trains ``config`` as ``rllib-llm train x.py`` would
    (the same options, outputs and tracking). Called from a tuned example's ``__main__`` block, which is
    also what ``ray job submit -- python tuned_examples/x.py`` runs. Exits with status 2 on a user error."""
    if source is None:
        source = sys._getframe(1).f_globals.get("__file__") or sys.argv[0]
        source = os.path.relpath(source) if os.path.isabs(source) else source
    parser = argparse.ArgumentParser(prog=f"python {source}", description=f"Train the tuned example {source}.")
    add_train_options(parser)
    args = parser.parse_args(argv)
    _configure_logging()
    try:
        return train_config(config, dict(stop or {}), args, name=Path(source).stem, source=source)
    except USER_ERRORS as e:
        print(f"{parser.prog}: error: {one_line(str(e))}", file=sys.stderr)
        raise SystemExit(2) from e
    except LearningNotAchieved as e:
        print(f"{parser.prog}: {e}", file=sys.stderr)
        raise SystemExit(1) from e
    except KeyboardInterrupt as e:
        raise SystemExit(interrupted_status(e, parser.prog)) from None


# --- other commands ------------------------------------------------------------------------------------


def evaluate(args: argparse.Namespace) -> dict[str, Any]:
    """Greedy success of a checkpoint on held-out seeds. Its state goes into the config of ``--example`` (no
    code from the checkpoint runs); RLlib's ``Algorithm.from_checkpoint`` (which unpickles the config saved
    in it) only with ``--trust-checkpoint``."""
    path = Path(args.checkpoint)
    if not path.is_dir():
        raise UserError(f"Checkpoint {args.checkpoint!r} is not a directory.")
    trust = getattr(args, "trust_checkpoint", False)
    example = getattr(args, "example", None)
    try:  # a missing, corrupt or unsafe file: one line naming it, before Ray starts
        point = read_checkpoint(path, trust)
    except CheckpointError as e:
        raise UserError(f"Could not restore checkpoint: {e}") from e
    if example is None and not trust:
        hint = _trained_from(path) or "tuned_examples/<example>.py"
        raise UserError(f"Evaluating {args.checkpoint!r} needs the config it was trained with: pass --example {hint} "
                        "(or --trust-checkpoint to unpickle the config saved in it, which runs any code the checkpoint "
                        "carries).")
    from ray.rllib.algorithms.algorithm import Algorithm

    config = load_tuned_example(example)[0] if example is not None else None
    quiet_third_party_notices()
    init_ray()
    try:
        if config is not None:
            algo = config.build_algo()
            restore(algo, point, trust)
        else:
            algo = Algorithm.from_checkpoint(str(path.resolve()))
    except Exception as e:  # Ray wraps the cause deeply: say what failed in one line.
        raise UserError(f"Could not restore checkpoint {args.checkpoint!r}: {type(e).__name__}: {one_line(str(e))}") from e
    offset = args.seed_offset if args.seed_offset is not None else algo.config.evaluation_seed_offset
    num_seeds = args.num_seeds or algo.config.evaluation_num_seeds
    start = time.perf_counter()
    print(f"Evaluating {path} on {num_seeds} held-out seeds from {offset} (greedy, one episode each)...",
          flush=True)
    stats = algo.evaluate_seeds(list(range(offset, offset + num_seeds)))
    print(format_eval("Policy", stats) + f" ({time.perf_counter() - start:.0f} s)")
    algo.stop()
    return stats


def _trained_from(checkpoint: Path) -> str | None:
    """The tuned example a CLI run's checkpoint names in its summary (shown in a hint, never executed)."""
    try:
        source = json.loads((checkpoint.parent / SUMMARY_FILE).read_text()).get("tuned_example")
    except (OSError, ValueError, AttributeError):
        return None
    return source if isinstance(source, str) and source.endswith(".py") and "\n" not in source else None


def plot(args: argparse.Namespace) -> list[Path]:
    from rllib_llm.run.plots import plot_runs

    try:
        paths = plot_runs(args.run_dirs, args.output, args.metric)
    except ImportError as e:
        raise UserError("Plots need matplotlib: pip install 'rllib-llm[plots]'") from e
    except KeyError as e:
        raise UserError(f"--metric: {e.args[0]}") from e
    if not paths:
        raise UserError(f"No metrics to plot in {', '.join(args.run_dirs)}.")
    for path in paths:
        print(f"Wrote {path}")
    return paths


def read_trajectories(run_dir: str | Path) -> list[dict[str, Any]]:
    path = Path(run_dir) / TRAJECTORIES_FILE
    if not path.is_file():
        raise UserError(f"{path} not found: is {run_dir} a run directory of `rllib-llm train`?")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def show_trajectory(args: argparse.Namespace) -> str:
    records = read_trajectories(args.run_dir)
    if not records:
        raise UserError(f"{args.run_dir} has no recorded trajectories (trained with --trajectories-per-iter 0?).")
    iteration = args.iteration if args.iteration is not None else max(r["iteration"] for r in records)
    chosen = [r for r in records if r["iteration"] == iteration]
    if not chosen:
        available = sorted({r["iteration"] for r in records})
        raise UserError(f"No trajectories of iteration {iteration}; recorded iterations: {available}")
    if args.index is not None:
        if not 0 <= args.index < len(chosen):
            raise UserError(f"--index must be in [0, {len(chosen) - 1}] for iteration {iteration}, got {args.index}")
        chosen = [chosen[args.index]]
    legend = ("Group ids are <EnvRunner>-<rollout>-<group>: the episodes of one group start from the same seed and "
              "are compared with each other.")
    text = "\n\n".join([legend, *(format_trajectory(r, prompts=not args.no_prompts) for r in chosen)])
    print(text)
    return text


def prompt_agent(args: argparse.Namespace) -> dict[str, Any]:
    from rllib_llm.prompt_agent import ChatClient, evaluate_prompt_agent, prompt_agent_config

    if (args.env is None) == (args.example is None):
        raise UserError("prompt-agent needs exactly one of --env NAME or --example TUNED_EXAMPLE.py")
    try:
        env_config = json.loads(args.env_config) if args.env_config else None
        extra_body = json.loads(args.extra_body) if args.extra_body else None
    except json.JSONDecodeError as e:
        raise UserError(f"--env-config/--extra-body must be JSON: {e}") from e
    base = load_tuned_example(args.example)[0] if args.example else None
    config = prompt_agent_config(
        env=args.env, env_config=env_config, base=base, max_tokens=args.max_tokens,
        max_episode_steps=args.max_episode_steps,
    )
    validate_config(config, args.example or f"--env {args.env}")
    client = ChatClient(
        args.base_url, args.model, api_key_env=args.api_key_env, timeout=args.timeout, max_retries=args.max_retries,
        requests_per_minute=args.requests_per_minute, extra_body=extra_body,
    )
    offset = args.seed_offset if args.seed_offset is not None else config.evaluation_seed_offset
    stats, episodes = evaluate_prompt_agent(
        config, client, list(range(offset, offset + args.episodes)), temperature=args.temperature,
        concurrency=args.concurrency,
    )
    env_name = args.env or config.env
    print(format_eval(f"Prompt agent {args.model} on {env_name}", stats))
    print(f"API: {stats['api_requests']} request(s), {stats['api_retries']} retried, {stats['api_failures']} failed")
    if args.output:
        output = Path(args.output)
        output.mkdir(parents=True, exist_ok=True)
        from rllib_llm.prompt_agent import render_messages

        with open(output / TRAJECTORIES_FILE, "w") as file:
            for episode in episodes:
                file.write(json.dumps(episode_record(episode, 0, render_messages), default=str) + "\n")
        (output / SUMMARY_FILE).write_text(json.dumps({"model": args.model, "env": str(env_name), **stats}, indent=2))
    return stats


# --- argument parsing ----------------------------------------------------------------------------------


def _at_least(low: int):
    """An argparse type: an int >= ``low``, else a one-line error naming the bound."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}, got {value}")
        return value

    return parse


def add_train_options(p: argparse.ArgumentParser) -> None:
    """The options of ``rllib-llm train`` after the tuned example (shared with :func:`run_example`)."""
    p.add_argument("--iterations", "--stop-iters", type=_at_least(1), default=None,
                   help="overrides stop['training_iteration'] (--stop-iters: RLlib's example-script name)")
    p.add_argument("--num-env-runners", type=_at_least(0), default=None,
                   help="remote EnvRunners (RLlib's example-script flag: --set env_runners.num_env_runners=N)")
    p.add_argument("--num-learners", type=_at_least(0), default=None,
                   help="remote Learners (RLlib's example-script flag: --set learners.num_learners=N)")
    p.add_argument("--stop-reward", type=float, default=None,
                   help=f"also stop once {STOP_REWARD_KEY} reaches this (RLlib's example-script flag)")
    p.add_argument("--as-test", action="store_true",
                   help="exit with status 1 unless the run reached a stop criterion other than its iteration or "
                        "time budget (RLlib's example-script flag; e.g. with --stop-reward)")
    p.add_argument("--time-budget-s", type=float, default=None,
                   help="also stop once training took this long (stop['time_total_s']); the final checkpoint "
                        "and evaluation still run")
    p.add_argument("--output", default=None, help="run directory (default runs/<example>)")
    p.add_argument("--seed", type=_at_least(0), default=None,
                   help="the run's seed (overrides the example's .debugging(seed=...)): start states, sampling, "
                        "weight init of new parameters; held-out evaluation seeds stay the same")
    p.add_argument("--eval-seeds", type=_at_least(1), default=None, help="held-out seeds evaluated before and after")
    p.add_argument("--gpu", action="store_true",
                   help=f"the GPU-sized run: Learner and EnvRunner on the GPU, at least {GPU_NUM_GROUPS} episode groups "
                        f"and {GPU_NUM_EPISODES} episodes per iteration, micro-batches of at least {GPU_MICRO_BATCH_SIZE} rows")
    p.add_argument("--model", default=None,
                   help="the policy's model instead of the example's, its other settings (LoRA, dtype) kept: a "
                        "Hugging Face id, a local folder or a local .gguf file (converted once into the cache)")
    p.add_argument("--set", action="append", dest="overrides", metavar="METHOD.ARG=VALUE",
                   help="any argument of the config's builder methods, applied after the example (and --gpu): "
                        "--set training.lr=5e-5 --set generation.backend=vllm --set group_rollouts.num_groups=8; "
                        "a deeper path merges into a dict (--set environment.env_config.max_steps=10, --set "
                        "llm.lora.r=8). Repeatable; --set list prints every settable argument")
    p.add_argument("--no-eval", action="store_true", help="skip the before/after evaluation")
    p.add_argument("--checkpoint-every", type=_at_least(0), default=DEFAULT_CHECKPOINT_EVERY,
                   help=f"checkpoint every N iterations, so that a killed run can --resume (default "
                        f"{DEFAULT_CHECKPOINT_EVERY}; 0: only at the end). A LoRA checkpoint holds the adapters and "
                        "optimizer state, not the frozen base: benchmarks/results/checkpoint_cost.md")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the run already in --output (without it, an existing run folder is refused)")
    p.add_argument("--resume", action="store_true",
                   help="continue the run in --output from its last complete checkpoint (iteration, optimizer, RNG)")
    p.add_argument("--trajectories-per-iter", type=int, default=2, help="episodes per iteration saved to trajectories.jsonl")
    add_trust_option(p)
    g = p.add_argument_group("tracking")
    g.add_argument("--tracking-uri", default=None,
                   help="MLflow: a directory (default ./mlruns, or $MLFLOW_TRACKING_URI) or a URI (http://server:5000)")
    g.add_argument("--experiment", default=None, help="MLflow experiment (default: the example's name)")
    g.add_argument("--run-name", default=None, help="tracker run name (default: <output dir>-<time>)")
    g.add_argument("--no-tracking", action="store_true", help="no MLflow run")
    g.add_argument("--log-checkpoints", choices=("final", "all", "none"), default="final",
                   help="checkpoints logged as artifacts (all: also every --checkpoint-every)")
    g.add_argument("--wandb-project", default=None, help="also log to this Weights & Biases project (needs wandb)")
    g.add_argument("--wandb-entity", default=None, help="Weights & Biases entity (team or user) of --wandb-project")


def add_trust_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--trust-checkpoint", action="store_true",
                   help="load a checkpoint that holds pickled state (older runs, RLlib's default format): "
                        "unpickling runs whatever code the files carry, so only for checkpoints you or someone "
                        "you trust wrote")


def plain_text(doc: str) -> str:
    """A reST docstring as ``--help`` text: ``code`` and :role:`target` become their plain words."""
    doc = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", doc)
    return re.sub(r"``([^`]+)``", r"\1", doc)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rllib-llm", description=plain_text(__doc__),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("train", help="train a tuned example")
    p.add_argument("tuned_example", help="a Python file defining `config` (and optionally `stop`)")
    add_train_options(p)
    p.set_defaults(func=train)
    p = sub.add_parser("evaluate", help="success rate of a checkpoint over held-out seeds")
    p.add_argument("checkpoint", help="a run's checkpoint folder (DIR/checkpoint)")
    p.add_argument("--num-seeds", type=_at_least(1), default=None,
                   help="held-out seeds, one greedy episode each (default: the config's evaluation_num_seeds, as "
                        "training evaluates)")
    p.add_argument("--seed-offset", type=int, default=None,
                   help="first seed (default: the config's evaluation_seed_offset, the seeds training never sees)")
    p.add_argument("--example", default=None,
                   help="the tuned example the checkpoint was trained from: its config is built from this file and "
                        "the checkpoint's state loaded into it (without it, the config pickled in the checkpoint "
                        "is loaded, which needs --trust-checkpoint)")
    add_trust_option(p)
    p.set_defaults(func=evaluate)
    p = sub.add_parser("plot", help="PNG learning curves of one or more run directories")
    p.add_argument("run_dirs", nargs="+", help="run folders (each with progress.jsonl); several share the axes")
    p.add_argument("--output", default=None, help="directory for the PNGs (default <first run>/plots)")
    p.add_argument("--metric", action="append", default=None, metavar="NAME",
                   help="plot this progress.jsonl key instead of the default curves (repeatable), e.g. "
                        "learners/default_policy/policy_loss or env_runners/weight_sync_s")
    p.set_defaults(func=plot)
    p = sub.add_parser("show-trajectory", help="print sampled trajectories of a run as text")
    p.add_argument("run_dir", help="a run folder (with trajectories.jsonl)")
    p.add_argument("--iteration", type=int, default=None, help="default: the last recorded")
    p.add_argument("--index", type=int, default=None, help="one trajectory of the iteration (default: all)")
    p.add_argument("--no-prompts", action="store_true", help="observations instead of full prompts")
    p.set_defaults(func=show_trajectory)
    p = sub.add_parser("prompt-agent", help="success rate of an OpenAI-compatible chat model on an env")
    p.add_argument("--env", default=None, help="env name (default prompts and memory of the env)")
    p.add_argument("--env-config", default=None, help="JSON env_config")
    p.add_argument("--example", default=None, help="a tuned example: its env, prompts and memory")
    p.add_argument("--base-url", required=True, help="e.g. https://api.openai.com/v1 or http://localhost:8000/v1")
    p.add_argument("--model", required=True, help="the model name the endpoint serves")
    p.add_argument("--api-key-env", default="OPENAI_API_KEY", help="env var holding the API key")
    p.add_argument("--episodes", type=int, default=32, help="held-out seeds, one episode each")
    p.add_argument("--seed-offset", type=int, default=None,
                   help="first seed (default: the config's evaluation_seed_offset, or 0 with --env)")
    p.add_argument("--max-tokens", type=int, default=None, help="per response (default 512 with --env)")
    p.add_argument("--max-episode-steps", type=int, default=None,
                   help="step limit of an episode (default: the example's, or the env's with --env)")
    p.add_argument("--temperature", type=float, default=None, help="default: greedy (temperature 0)")
    p.add_argument("--concurrency", type=int, default=8, help="requests in flight")
    p.add_argument("--requests-per-minute", type=float, default=None, help="token-bucket rate limit")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per request")
    p.add_argument("--max-retries", type=int, default=5,
                   help="retries of a transient failure (timeout, 408/409/429/5xx) with exponential backoff")
    p.add_argument("--extra-body", default=None, help='JSON merged into each request, e.g. \'{"top_k": 1}\'')
    p.add_argument("--output", default=None, help="directory for trajectories.jsonl and summary.json")
    p.set_defaults(func=prompt_agent)
    p = sub.add_parser("settings", help="every declared config setting: builder method, default, meaning")
    p.add_argument("--builder", default=None, choices=("training", "group_rollouts", "evaluation"),
                   help="only the settings of this builder method")
    p.add_argument("--algorithm", default=None, metavar="NAME",
                   help="show this algorithm's defaults (grpo, gigpo, dapo, ppo, ...; default: the declared ones)")
    p.set_defaults(func=show_settings)
    return parser


def show_settings(args: argparse.Namespace) -> None:
    """``rllib-llm settings``: the declared settings as a markdown table (notes/settings.md is its output)."""
    from rllib_llm.algorithms import ALGORITHMS
    from rllib_llm.algorithms.settings import settings_table

    config = None
    if args.algorithm is not None:
        if args.algorithm not in ALGORITHMS:
            raise UserError(f"unknown algorithm {args.algorithm!r}; one of {', '.join(sorted(ALGORITHMS))}")
        config = ALGORITHMS[args.algorithm]()
    print(settings_table(args.builder, config))


USER_ERRORS = (UserError, ValueError, FileNotFoundError)


def _configure_logging() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")


def main(argv: list[str] | None = None) -> int:
    _configure_logging()
    args = build_parser().parse_args(argv)
    try:
        args.func(args)
    except USER_ERRORS as e:
        print(f"rllib-llm: error: {one_line(str(e))}", file=sys.stderr)
        return 2
    except LearningNotAchieved as e:
        print(f"rllib-llm: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as e:
        return interrupted_status(e, "rllib-llm")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Experiment tracking for ``rllib-llm train``: MLflow by default (a local ``./mlruns``), W&B when asked.

Tracking lives in the CLI's training loop rather than in an RLlib callback because the CLI owns what
becomes the artifacts (the run directory: checkpoint, progress.jsonl, trajectories.jsonl, summary.json).
Tune sweeps use Ray's own ``MLflowLoggerCallback`` on the same store (see :mod:`rllib_llm.run.sweeps`).

Where runs go (``--tracking-uri``, else ``$MLFLOW_TRACKING_URI``, else ``./mlruns``):

- a directory path (the default ``./mlruns``): an SQLite store ``<dir>/mlflow.db`` with artifacts under
  ``<dir>/artifacts`` (MLflow 3 refuses plain-file stores unless ``MLFLOW_ALLOW_FILE_STORE`` is set);
- any MLflow URI: ``http(s)://`` (a tracking server), ``sqlite:///``, ``file://``, ``databricks``.

Both libraries are imported only when used, so the core install needs neither. A tracker that fails in
the middle of a run warns once and is dropped: losing a metrics stream must not kill a training run.
"""

from __future__ import annotations

import logging
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

logger = logging.getLogger(__name__)

DEFAULT_TRACKING_DIR = "mlruns"
#: RLlib settings worth a param besides the LLM-specific ones (every field LLMConfig adds is logged).
RLLIB_PARAMS = ("env", "env_config", "lr", "gamma", "grad_clip", "num_epochs", "minibatch_size", "seed",
                "num_env_runners", "num_learners", "num_gpus_per_learner")
MAX_PARAM_LENGTH = 500
#: The tag naming a run's folder: how ``--resume`` finds (and a new run closes) a run a kill left RUNNING.
RUN_DIR_TAG = "run_dir"
_URI_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]+:")


class TrackingError(RuntimeError):
    """Tracking was asked for but cannot start (package missing, server unreachable): said in one line."""


class Tracker(Protocol):
    """What the training loop calls; implementations: :class:`MLflowTracker`, :class:`WandbTracker`."""

    name: str

    def log_params(self, params: dict[str, str]) -> None: ...

    def log_metrics(self, metrics: dict[str, float], step: int) -> None: ...

    def log_artifact(self, path: Path, artifact_path: str | None = None) -> None: ...

    def finish(self, status: str) -> None: ...


def resolve_tracking_uri(uri: str | None) -> tuple[str, str | None]:
    """``(tracking URI, artifact root or None)``; a plain directory becomes an SQLite store inside it."""
    uri = uri or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_TRACKING_DIR
    if uri == "databricks" or (_URI_SCHEME.match(uri) and not re.match(r"^[a-zA-Z]:[\\/]", uri)):
        if uri.startswith("file:"):
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")  # asked for explicitly
        return uri, None
    directory = Path(uri).expanduser().resolve()
    directory.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{directory / 'mlflow.db'}", (directory / "artifacts").as_uri()


def _flatten(prefix: str, value: Any, out: dict[str, str]) -> None:
    if isinstance(value, dict) and value:
        for key, inner in value.items():
            _flatten(f"{prefix}.{key}", inner, out)
    elif not callable(value):
        text = value.__name__ if isinstance(value, type) else str(value)
        out[prefix] = text if len(text) <= MAX_PARAM_LENGTH else text[: MAX_PARAM_LENGTH - 3] + "..."


def config_params(config: Any) -> dict[str, str]:
    """The params of a run: every field LLMConfig adds to RLlib's AlgorithmConfig (model, sampling,
    group rollouts, advantage/loss settings) plus a few RLlib ones, dicts flattened (``sampling.stop``)."""
    from ray.rllib.algorithms.algorithm_config import AlgorithmConfig

    rllib_fields = set(vars(AlgorithmConfig()))
    names = [n for n in vars(config) if not n.startswith("_") and n not in rllib_fields] + list(RLLIB_PARAMS)
    params: dict[str, str] = {"algorithm": getattr(config.algo_class, "__name__", str(config.algo_class))}
    for name in names:
        _flatten(name, getattr(config, name, None), params)
    return params


def _metric_name(key: str) -> str:
    """MLflow accepts letters, digits and ``_-. :/`` in metric names."""
    return re.sub(r"[^\w\-. :/]", "_", key)


def ensure_experiment(client: Any, name: str, artifact_root: str | None) -> str:
    """The id of MLflow experiment ``name``, created (artifacts under ``artifact_root/name``) if missing."""
    existing = client.get_experiment_by_name(name)
    if existing is not None:
        return existing.experiment_id
    location = f"{artifact_root}/{name}" if artifact_root else None
    try:
        return client.create_experiment(name, artifact_location=location)
    except Exception:  # created meanwhile by a concurrent run
        existing = client.get_experiment_by_name(name)
        if existing is None:
            raise
        return existing.experiment_id


class MLflowTracker:
    """One MLflow run through ``MlflowClient`` (no fluent global state, so runs never leak between calls)."""

    name = "mlflow"
    #: True when this tracker continues a stored run (``--resume``) rather than a new one.
    resumed: bool = False

    def __init__(
        self, tracking_uri: str | None, experiment: str, run_name: str, tags: dict[str, str], run_id: str | None = None,
        resume: bool = False,
    ) -> None:
        """A new run, or the stored run ``run_id`` (from the checkpoint) set RUNNING again; with ``resume``
        (``--resume``) and no ``run_id``, the run still RUNNING with the same ``run_dir`` tag (a run killed before its first checkpoint), set RUNNING
        again. Any other run of that folder still RUNNING was killed (SIGKILL leaves it so): it is closed as
        KILLED, so a killed run never stays RUNNING forever."""
        try:
            from mlflow.tracking import MlflowClient
        except ImportError as e:
            raise TrackingError(MLFLOW_MISSING) from e
        self.tracking_uri, artifact_root = resolve_tracking_uri(tracking_uri)
        self.client = MlflowClient(tracking_uri=self.tracking_uri)
        run_dir = tags.get(RUN_DIR_TAG)
        try:
            experiment_id = ensure_experiment(self.client, experiment, artifact_root)
            stale = self.running_runs_of(experiment_id, run_dir) if run_dir else []
            if resume and run_id is None and stale:
                run_id = stale[0]
            run = self._continue(run_id) if run_id else None
            if run is None:
                run = self.client.create_run(experiment_id, run_name=run_name, tags=tags)
            for other in stale:
                if other != run.info.run_id:
                    self.client.set_terminated(other, "KILLED")
                    logger.warning("MLflow run %s of %s was left RUNNING by a killed run: closed as KILLED",
                                   other, run_dir)
            experiment_id = run.info.experiment_id
        except Exception as e:  # an unreachable server, a bad URI: one line, not a 50-frame traceback
            raise TrackingError(f"MLflow at {self.tracking_uri!r}: {type(e).__name__}: {e}") from e
        self.run_id: str = run.info.run_id
        self.experiment_id = experiment_id

    def running_runs_of(self, experiment_id: str, run_dir: str) -> list[str]:
        """Ids of the experiment's RUNNING runs tagged with ``run_dir``, newest first."""
        runs = self.client.search_runs(
            [experiment_id], filter_string="attributes.status = 'RUNNING'", order_by=["attributes.start_time DESC"],
            max_results=1000,
        )
        return [r.info.run_id for r in runs if r.data.tags.get(RUN_DIR_TAG) == run_dir]

    def _continue(self, run_id: str) -> Any | None:
        """The stored run ``run_id``, marked RUNNING; None (a new run, with a warning) when this store lacks it."""
        from mlflow.exceptions import MlflowException

        try:
            run = self.client.get_run(run_id)
        except MlflowException as e:
            logger.warning("MLflow run %s to resume is not in %s (%s): logging to a new run", run_id,
                           self.tracking_uri, e)
            return None
        self.client.update_run(run_id, "RUNNING")
        self.resumed = True
        return run

    def log_params(self, params: dict[str, str]) -> None:
        from mlflow.entities import Param

        if self.resumed:  # MLflow params are write-once: the resumed run keeps those it was started with
            stored = self.client.get_run(self.run_id).data.params
            params = {k: v for k, v in params.items() if k not in stored}

        items = [Param(k, v) for k, v in params.items()]
        for start in range(0, len(items), 100):  # MLflow's per-batch limit
            self.client.log_batch(self.run_id, params=items[start : start + 100])

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        items = [Metric(_metric_name(k), v, now, step) for k, v in metrics.items()]
        for start in range(0, len(items), 1000):
            self.client.log_batch(self.run_id, metrics=items[start : start + 1000])

    def log_artifact(self, path: Path, artifact_path: str | None = None) -> None:
        if path.is_dir():
            self.client.log_artifacts(self.run_id, str(path), artifact_path)
        else:
            self.client.log_artifact(self.run_id, str(path), artifact_path)

    def finish(self, status: str) -> None:
        self.client.set_terminated(self.run_id, status)


class WandbTracker:
    """A Weights & Biases run (only when a project is given; ``wandb`` is imported then)."""

    name = "wandb"

    def __init__(self, project: str, entity: str | None, run_name: str, directory: Path, tags: dict[str, str]) -> None:
        try:
            import wandb
        except ImportError as e:
            raise TrackingError("W&B tracking needs wandb: pip install wandb") from e
        self._wandb = wandb
        self.run = wandb.init(project=project, entity=entity, name=run_name, dir=str(directory), config=tags)

    def log_params(self, params: dict[str, str]) -> None:
        self.run.config.update(params, allow_val_change=True)

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        self.run.log(metrics, step=step)

    def log_artifact(self, path: Path, artifact_path: str | None = None) -> None:
        name = re.sub(r"[^\w\-.]", "_", f"{self.run.name or self.run.id}-{artifact_path or path.name}")
        artifact = self._wandb.Artifact(name, type="model" if path.is_dir() else "file")
        if path.is_dir():
            artifact.add_dir(str(path))
        else:
            artifact.add_file(str(path))
        self.run.log_artifact(artifact)

    def finish(self, status: str) -> None:
        self.run.finish(exit_code=0 if status == "FINISHED" else 1)


@dataclass
class Tracking:
    """The trackers of one run, called together; a tracker that raises is warned about and dropped."""

    trackers: list[Any] = field(default_factory=list)

    def _each(self, method: str, *args: Any) -> None:
        for tracker in list(self.trackers):
            try:
                getattr(tracker, method)(*args)
            except Exception as e:
                logger.warning("%s tracking stopped: %s failed with %s: %s", tracker.name, method, type(e).__name__, e)
                self.trackers.remove(tracker)

    def log_params(self, params: dict[str, str]) -> None:
        self._each("log_params", params)

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        self._each("log_metrics", metrics, step)

    def log_artifact(self, path: Path, artifact_path: str | None = None) -> None:
        if path.exists():
            self._each("log_artifact", path, artifact_path)

    def finish(self, status: str = "FINISHED") -> None:
        self._each("finish", status)

    def describe(self) -> list[str]:
        """One line per tracker, for the CLI to print where the run went."""
        lines = []
        for tracker in self.trackers:
            if isinstance(tracker, MLflowTracker):
                lines.append(f"MLflow run {tracker.run_id} (experiment id {tracker.experiment_id}) at {tracker.tracking_uri}")
            else:
                lines.append(f"{tracker.name} run {getattr(tracker.run, 'url', None) or tracker.run.id}")
        return lines


MLFLOW_MISSING = "MLflow tracking needs mlflow: pip install 'rllib-llm[tracking]'"


def mlflow_usable(tracking_uri: str | None) -> bool:
    """Whether mlflow can be imported; the one rule for a missing package (runs and sweeps alike): asked for
    explicitly (``tracking_uri`` or ``$MLFLOW_TRACKING_URI``) it is a :class:`TrackingError`, else one warning."""
    try:
        import mlflow  # noqa: F401
    except ImportError as e:
        if tracking_uri is not None or "MLFLOW_TRACKING_URI" in os.environ:
            raise TrackingError(MLFLOW_MISSING) from e
        logger.warning("MLflow tracking is off (%s); --no-tracking silences this.", MLFLOW_MISSING)
        return False
    return True


def start_tracking(
    *,
    mlflow: bool = True,
    tracking_uri: str | None = None,
    experiment: str = "rllib-llm",
    run_name: str = "run",
    wandb_project: str | None = None,
    wandb_entity: str | None = None,
    directory: Path = Path("."),
    tags: dict[str, str] | None = None,
    mlflow_run_id: str | None = None,
    resume: bool = False,
) -> Tracking:
    """The run's trackers. MLflow is on by default but optional: without ``tracking_uri`` (or
    ``$MLFLOW_TRACKING_URI``) a missing mlflow package only warns; asked for explicitly, it is an error.
    With ``resume`` the MLflow run ``mlflow_run_id`` (or the folder's run a kill left RUNNING) is continued
    instead of starting one (see :class:`MLflowTracker`)."""
    tags = dict(tags or {})
    trackers: list[Any] = []
    if mlflow and mlflow_usable(tracking_uri):
        trackers.append(MLflowTracker(tracking_uri, experiment, run_name, tags, mlflow_run_id, resume))
    if wandb_project:
        trackers.append(WandbTracker(wandb_project, wandb_entity, run_name, directory, tags))
    return Tracking(trackers)

"""Ray Tune sweeps over an LLMConfig: a grid (group size x learning rate, say), best trial by success rate.

Our Algorithms are Tune Trainables, so a sweep is RLlib's usual ``tune.Tuner(GiGPO, param_space=config)``
with ``tune.grid_search`` in the config. What this module adds: every grid point is validated before Tune
starts (a bad value fails in one line, not in a trial actor minutes later), trials run one at a time by
default (2-CPU machines), each trial is tracked as ``rllib-llm train`` tracks a run (:class:`TrackingCallback`:
the same store, params and metric names), and the results come back as a table and the best trial.

    python tuned_examples/numberline_gigpo_tune.py --iterations 3 --grid group_size=4,8 --grid lr=1e-5,5e-5
"""

from __future__ import annotations

import argparse
import ast
import itertools
import logging
import math
from pathlib import Path
from typing import Any

from ray.tune import Callback

from rllib_llm.algorithms.algorithm import HELD_OUT_RESULTS
from rllib_llm.metrics import ENV_RUNNERS, SUCCESS_RATE
from rllib_llm.run.stopping import ITERATIONS, check_stop

logger = logging.getLogger(__name__)

SUCCESS_METRIC = f"{ENV_RUNNERS}/{SUCCESS_RATE}"
#: Greedy success on the held-out seeds (``evaluation(held_out_interval=N)``): what a sweep selects on.
HELD_OUT_METRIC = f"{HELD_OUT_RESULTS}/{SUCCESS_RATE}"


def grid_points(grid: dict[str, list]) -> list[dict[str, Any]]:
    """Every combination of the grid's values, in Tune's order (the first field varies slowest)."""
    keys = list(grid)
    return [dict(zip(keys, values, strict=True)) for values in itertools.product(*(grid[k] for k in keys))]


def trial_config(config: Any, point: dict[str, Any]) -> Any:
    """The config one grid point trains: a copy of ``config`` with the point's values set."""
    trial = config.copy(copy_frozen=False)
    for key, value in point.items():
        setattr(trial, key, value)
    return trial


def grid_param_space(config: Any, grid: dict[str, list]) -> Any:
    """A copy of ``config`` with ``tune.grid_search`` over each field of ``grid`` (config attribute names,
    e.g. ``group_size``, ``lr``). Raises ValueError naming the field for an unknown field, an empty value
    list, or a value the config rejects (each grid point is validated)."""
    from ray import tune

    from rllib_llm.run.cli import one_line

    unknown = [k for k in grid if not hasattr(config, k) or k.startswith("_")]
    if unknown:
        raise ValueError(f"Unknown config field(s) in the grid: {unknown}; use config attribute names, e.g. group_size, lr")
    empty = [k for k, values in grid.items() if not list(values)]
    if empty:
        raise ValueError(f"Grid field(s) {empty} have no values")
    for point in grid_points(grid):
        try:
            trial_config(config, point).validate()
        except ValueError as e:
            raise ValueError(f"Grid point {point} is invalid: {one_line(str(e))}") from e
    space = config.copy(copy_frozen=False)
    for key, values in grid.items():
        setattr(space, key, tune.grid_search(list(values)))
    return space


def parse_grid(items: list[str]) -> dict[str, list]:
    """``["group_size=4,8", "lr=1e-5,5e-5"]`` -> ``{"group_size": [4, 8], "lr": [1e-05, 5e-05]}`` (values
    are Python literals; anything else stays a string)."""
    grid: dict[str, list] = {}
    for item in items:
        key, sep, values = item.partition("=")
        if not sep or not key.strip() or not values.strip():
            raise ValueError(f"--grid takes FIELD=V1,V2,..., got {item!r}")
        parsed = []
        for text in values.split(","):
            try:
                parsed.append(ast.literal_eval(text.strip()))
            except (ValueError, SyntaxError):
                parsed.append(text.strip())
        grid[key.strip()] = parsed
    return grid


class TrackingCallback(Callback):
    """A Tune callback that tracks every trial as ``rllib-llm train`` tracks a run: the same trackers
    (:func:`~rllib_llm.run.tracking.start_tracking`), the same params (:func:`config_params` of the trial's
    config) and the same metric names (:func:`~rllib_llm.run.progress.flatten_metrics` per iteration), so a
    sweep's runs and a single run compare in one MLflow experiment. Built by :func:`tracking_callbacks`."""

    def __init__(self, config: Any, grid: dict[str, list], tracking_uri: str | None, experiment: str) -> None:
        super().__init__()
        self.config, self.grid, self.tracking_uri, self.experiment = config, grid, tracking_uri, experiment
        self.runs: dict[str, Any] = {}

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        from rllib_llm.run.tracking import config_params, start_tracking

        point = {key: trial.config[key] for key in self.grid}
        tracking = start_tracking(
            tracking_uri=self.tracking_uri,
            experiment=self.experiment,
            run_name=",".join(f"{k}={v}" for k, v in point.items()) or str(trial),
            tags={"tune_trial_id": trial.trial_id},
        )
        tracking.log_params(config_params(trial_config(self.config, point)))
        self.runs[trial.trial_id] = tracking

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict, **info: Any) -> None:
        from rllib_llm.run.progress import flatten_metrics

        if trial.trial_id in self.runs:
            self.runs[trial.trial_id].log_metrics(flatten_metrics(result), step=int(result.get(ITERATIONS, 0)))

    def _finish(self, trial: Any, status: str) -> None:
        tracking = self.runs.pop(trial.trial_id, None)
        if tracking is not None:
            tracking.finish(status)

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._finish(trial, "FINISHED")

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._finish(trial, "FAILED")


def tracking_callbacks(config: Any, grid: dict[str, list], tracking_uri: str | None, experiment: str) -> list:
    """``[TrackingCallback]``; [] when mlflow is missing and tracking was not asked for explicitly
    (:func:`~rllib_llm.run.tracking.mlflow_usable`, the rule of ``rllib-llm train``)."""
    from rllib_llm.run.tracking import mlflow_usable

    return [TrackingCallback(config, grid, tracking_uri, experiment)] if mlflow_usable(tracking_uri) else []


def run_sweep(
    config: Any,
    grid: dict[str, list],
    *,
    iterations: int,
    storage_path: str | Path = "runs/tune",
    name: str = "sweep",
    metric: str = SUCCESS_METRIC,
    mode: str = "max",
    max_concurrent_trials: int = 1,
    tracking: bool = True,
    tracking_uri: str | None = None,
    checkpoint_at_end: bool = False,
    stop: dict[str, Any] | None = None,
) -> Any:
    """Runs the grid with Tune (``tune.Tuner(config.algo_class, param_space=...)``), ``iterations``
    training iterations per trial, each stopped earlier by the other criteria of ``stop`` (a tuned example's
    stop dict, :mod:`rllib_llm.run.stopping`); returns Tune's ResultGrid. Each trial evaluates the held-out
    seeds every ``held_out_interval`` iterations (the config's; else once, at iteration ``iterations``)."""
    from ray import tune

    space = grid_param_space(config, grid)
    if space.held_out_interval is None:  # every trial reports held-out success at least at its last iteration
        space.held_out_interval = iterations
    callbacks = tracking_callbacks(config, grid, tracking_uri, name) if tracking else []
    tuner = tune.Tuner(
        config.algo_class,
        param_space=space,
        tune_config=tune.TuneConfig(metric=metric, mode=mode, max_concurrent_trials=max_concurrent_trials),
        run_config=tune.RunConfig(
            name=name,
            storage_path=str(Path(storage_path).resolve()),
            stop={**check_stop(stop or {}), ITERATIONS: iterations},
            callbacks=callbacks,
            checkpoint_config=tune.CheckpointConfig(checkpoint_at_end=checkpoint_at_end),
            verbose=1,
        ),
    )
    return tuner.fit()


def _metric_of(metrics: dict[str, Any], metric: str) -> float:
    value: Any = metrics.get(metric)
    if value is None:  # nested, as Algorithm.train() returns it
        value = metrics
        for key in metric.split("/"):
            value = value.get(key) if isinstance(value, dict) else None
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def summarize(results: Any, grid: dict[str, list], metric: str | None = None, mode: str = "max") -> dict[str, Any]:
    """The trials (grid values, training and held-out success, errors) and the best one by ``metric``
    (default: held-out success where the trials report it, else training success)."""
    trials = []
    for result in results:
        config = result.config or {}
        trials.append(
            {
                **{key: config.get(key) for key in grid},
                **{m: _metric_of(result.metrics or {}, m) for m in (SUCCESS_METRIC, HELD_OUT_METRIC, metric) if m},
                "iterations": (result.metrics or {}).get("training_iteration"),
                "error": None if result.error is None else f"{type(result.error).__name__}: {result.error}",
                "path": result.path,
            }
        )
    if metric is None:
        metric = HELD_OUT_METRIC if any(not math.isnan(t[HELD_OUT_METRIC]) for t in trials) else SUCCESS_METRIC
    scored = [t for t in trials if not math.isnan(t[metric])]
    best = (max if mode == "max" else min)(scored, key=lambda t: t[metric]) if scored else None
    return {"metric": metric, "mode": mode, "trials": trials, "best": best}


def format_summary(summary: dict[str, Any], grid: dict[str, list]) -> str:
    metric = summary["metric"]
    keys = list(grid)
    lines = ["  ".join(f"{k:>12}" for k in [*keys, "train success", "held-out"])]
    for trial in summary["trials"]:
        cells = [f"{trial[k]!s:>12}" for k in keys]
        cells += [f"{trial[SUCCESS_METRIC]:>13.3f}", f"{trial[HELD_OUT_METRIC]:>12.3f}"]
        lines.append("  ".join(cells) + (f"  ERROR {trial['error']}" if trial["error"] else ""))
    best = summary["best"]
    if best is None:
        lines.append(f"No trial reported {metric}.")
    else:
        point = ", ".join(f"{k}={best[k]}" for k in keys)
        lines.append(f"Best trial by {metric} ({summary['mode']}): {point}: {best[metric]:.3f} ({best['path']})")
    return "\n".join(lines)


def build_sweep_parser() -> argparse.ArgumentParser:
    """The options of a tune example's ``__main__`` block (:func:`sweep_main`)."""
    parser = argparse.ArgumentParser(description="Ray Tune grid sweep of a tuned example.")
    parser.add_argument("--iterations", type=int, default=None, help="per trial (default stop['training_iteration'])")
    parser.add_argument("--grid", action="append", default=[], help="FIELD=V1,V2 (replaces that field's values)")
    parser.add_argument("--base", default=None, help="sweep this tuned example's config instead")
    parser.add_argument("--storage", default="runs/tune", help="Tune's storage path (trial results)")
    parser.add_argument("--name", default=None, help="experiment name (default: the example's)")
    parser.add_argument("--max-concurrent", type=int, default=1, help="trials at once")
    parser.add_argument("--tracking-uri", default=None, help="MLflow store, as for rllib-llm train")
    parser.add_argument("--no-tracking", action="store_true", help="no MLflow runs")
    return parser


def sweep_main(config: Any, grid: dict[str, list], stop: dict | None = None, argv: list[str] | None = None) -> dict:
    """``python tuned_examples/<x>_tune.py [--iterations N] [--grid FIELD=V1,V2 ...] [--base EXAMPLE.py]``:
    the grid sweep of a tune example's ``__main__`` block. ``--base`` sweeps another tuned example's
    config (the tests use the tiny model). Exits with status 2 on a user error."""
    import sys

    from rllib_llm.run.cli import USER_ERRORS, init_ray, load_tuned_example, one_line
    from rllib_llm.run.tracking import TrackingError

    parser = build_sweep_parser()
    args = parser.parse_args(argv)
    try:
        if args.base:
            config, base_stop = load_tuned_example(args.base)
            stop = {**(stop or {}), **base_stop}
        grid = {**grid, **parse_grid(args.grid)}
        iterations = args.iterations or int((stop or {}).get(ITERATIONS, 10))
        name = args.name or (f"{Path(args.base).stem}_tune" if args.base else Path(sys.argv[0]).stem)
        grid_param_space(config, grid)  # validate before Ray starts
        check_stop(stop or {})
        init_ray()
        results = run_sweep(
            config, grid, iterations=iterations, storage_path=args.storage, name=name,
            max_concurrent_trials=args.max_concurrent, tracking=not args.no_tracking, tracking_uri=args.tracking_uri,
            stop=stop,
        )
    except (*USER_ERRORS, TrackingError) as e:
        print(f"{parser.prog}: error: {one_line(str(e))}", file=sys.stderr)
        raise SystemExit(2) from e
    summary = summarize(results, grid)
    print(format_summary(summary, grid), flush=True)
    return summary

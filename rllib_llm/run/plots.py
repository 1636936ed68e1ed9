"""Learning curves as PNGs from runs' ``progress.jsonl`` (what ``rllib-llm plot`` draws).

Reads the files ``rllib-llm train`` writes, not a tracker, so plotting works offline and on any copy of
a run directory. Several runs go into the same figures (one line each), to compare a sweep or a baseline.
matplotlib (the ``plots`` extra) is imported with the Agg backend: no display needed.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

#: (file stem, progress column, axis label, title) of each curve. The progress rows are the iteration's
#: sampled training episodes (exploring, temperature as configured) and the Learner's losses; the held-out
#: greedy evaluation is only in ``summary.json`` (before/after), drawn as markers on the success plot.
CURVES: list[tuple[str, str, str, str]] = [
    ("success_rate", "success", "success rate", "success rate of the training episodes"),
    ("return", "return", "episode return (mean)", "return of the training episodes"),
    ("response_length", "resp_len", "response length (tokens)", "response length, training episodes"),
    ("kl", "kl", "KL to reference", "KL to the reference policy (learner)"),
    ("valid_action_rate", "valid", "valid-action rate", "valid-action rate of the training episodes"),
    ("entropy", "entropy", "entropy", "entropy of the sampled tokens (learner)"),
]
#: summary.json keys of the held-out evaluations and the iteration each is drawn at ("iterations_done").
HELD_OUT = (("before", 0), ("after", None))


def read_progress(run_dir: str | Path) -> list[dict[str, float]]:
    """The rows of the run's latest training: ``progress.jsonl`` is appended to, so a rerun into the same
    directory starts over at iteration 1; only the rows from the last such start are returned."""
    path = Path(run_dir) / "progress.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: is {run_dir} a run directory of `rllib-llm train`?")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    start = 0
    for i in range(1, len(rows)):
        if rows[i].get("iter", math.nan) <= rows[i - 1].get("iter", math.nan):
            start = i
    return rows[start:]


def _series(rows: list[dict[str, float]], column: str) -> tuple[list[float], list[float]]:
    points = [(r.get("iter"), r.get(column)) for r in rows]
    points = [(x, y) for x, y in points if isinstance(y, (int, float)) and math.isfinite(y) and x is not None]
    return [x for x, _ in points], [y for _, y in points]


def read_held_out(run_dir: str | Path) -> list[tuple[float, float]]:
    """(iteration, held-out greedy success) of the run's before/after evaluations in ``summary.json``; none
    if it has no summary (a run still training) or was trained with ``--no-eval``."""
    path = Path(run_dir) / "summary.json"
    try:
        summary = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    points = []
    for key, iteration in HELD_OUT:
        stats = summary.get(key)
        at = iteration if iteration is not None else summary.get("iterations_done")
        if isinstance(stats, dict) and isinstance(stats.get("success_rate"), (int, float)) and at is not None:
            points.append((float(at), float(stats["success_rate"])))
    return points


def metric_curve(name: str) -> tuple[str, str, str, str]:
    """The curve of any ``progress.jsonl`` key (``learners/default_policy/policy_loss``): :data:`CURVES`'
    entry for a table column, else the key itself as axis label and title, and a file stem without
    slashes (``learners-default_policy-policy_loss``)."""
    for curve in CURVES:
        if curve[1] == name:
            return curve
    return (name.replace("/", "-"), name, name, f"{name} per iteration")


def metric_names(rows: list[dict[str, float]]) -> list[str]:
    """The keys of ``rows`` that hold a number in some row (what ``--metric`` can plot), sorted."""
    return sorted({k for r in rows for k, v in r.items() if k not in ("iter", "wall_time") and _finite(v)})


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def curve_figure(
    stem: str,
    runs: dict[str, list[dict[str, float]]],
    held_out: dict[str, list[tuple[float, float]]],
    curve: tuple[str, str, str, str] | None = None,
) -> Any:
    """The matplotlib figure of one curve (``stem`` of :data:`CURVES`, or ``curve`` as :func:`metric_curve`
    gives it) over ``runs`` (name -> progress rows), with the held-out points (name -> :func:`read_held_out`)
    on the success plot; None if no run logged the curve."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    stem, column, label, title = curve or next(curve for curve in CURVES if curve[0] == stem)
    series = {name: _series(rows, column) for name, rows in runs.items()}
    if not any(xs for xs, _ in series.values()):
        return None
    points = {name: held_out.get(name, []) if stem == "success_rate" else [] for name in runs}
    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    for i, (name, (xs, ys)) in enumerate(series.items()):
        if xs:
            ax.plot(xs, ys, marker="o", markersize=3, color=f"C{i}", label=f"{name}: training episodes")
        if points[name]:
            ax.scatter(*zip(*points[name], strict=True), marker="D", s=30, color=f"C{i}", zorder=3,
                       label=f"{name}: held-out greedy (before / after)")
    ax.set_xlabel("training iteration")
    ax.set_ylabel(label)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # iterations are whole: no 0.96, 0.98, ... ticks
    drawn = [x for xs, _ in series.values() for x in xs] + [x for pts in points.values() for x, _ in pts]
    if max(drawn) - min(drawn) < 2:  # one or two iterations: room around the points, not a lone dot
        ax.set_xlim(min(drawn) - 1, max(drawn) + 1)
    if len(runs) > 1 or any(points.values()):
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot_runs(
    run_dirs: list[str | Path], output: str | Path | None = None, metrics: list[str] | None = None
) -> list[Path]:
    """One PNG per curve that any run logged (KL only exists with ``kl_coeff > 0``); returns the paths.
    ``metrics`` (any ``progress.jsonl`` keys) replaces the default :data:`CURVES`; a name no run has is a
    ``KeyError`` naming the closest ones. ``output`` defaults to ``<first run>/plots``."""
    import difflib

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = {Path(d).name or str(d): read_progress(d) for d in run_dirs}
    held_out = {Path(d).name or str(d): read_held_out(d) for d in run_dirs}
    curves = list(CURVES) if metrics is None else [metric_curve(m) for m in metrics]
    known = sorted({name for rows in runs.values() for name in metric_names(rows)})
    for name in metrics or []:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=3, cutoff=0.4) or known[:3]
            raise KeyError(f"no run logged {name!r}; did you mean {', '.join(close)}? ({len(known)} metrics)")
    out = Path(output) if output is not None else Path(run_dirs[0]) / "plots"
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for curve in curves:
        stem = curve[0]
        fig = curve_figure(stem, runs, held_out, curve)
        if fig is None:
            continue
        path = out / f"{stem}.png"
        fig.savefig(path)
        plt.close(fig)
        written.append(path)
    return written

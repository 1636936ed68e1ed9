"""What every benchmark script shares: the ``--size`` flag, machine info, load average, table and JSON output.

Timings on a shared machine mean little without the load they were taken under, so every row carries
``os.getloadavg()`` next to its numbers and every results file carries the machine it ran on.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parent / "results"
SIZES = ("small", "medium", "large")


def cpu_model() -> str:
    """The CPU's marketing name (``/proc/cpuinfo``), else what ``platform`` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages, rounded (``[]`` where the OS has none)."""
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return []


def device_timed(fn: Any, *args: Any) -> float:
    """Seconds ``fn(*args)`` takes, with the GPU's queued work waited for before and after (when there is one)."""
    import time

    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()
    start = time.perf_counter()
    fn(*args)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - start


def load_1m() -> float | None:
    """The 1-minute load average, stored next to each timed row."""
    load = load_average()
    return load[0] if load else None


def machine_info() -> dict[str, Any]:
    """Date, cores, CPU, library versions, GPU (if any) and the current load average."""
    info: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "cores": os.cpu_count(),
        "cpu": cpu_model(),
        "python": platform.python_version(),
        "load_avg": load_average(),
    }
    for name in ("torch", "transformers", "ray"):
        try:
            info[name] = __import__(name).__version__
        except ImportError:
            info[name] = None
    try:
        import torch

        info["torch_threads"] = torch.get_num_threads()
        info["gpu"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    except ImportError:
        info["gpu"] = None
    return info


def size_argument(parser: argparse.ArgumentParser, meaning: str, default: str = "small") -> None:
    """Adds ``--size``: a preset name or a number, whose meaning each benchmark states."""
    parser.add_argument(
        "--size", default=default, help=f"{' | '.join(SIZES)} or a number ({meaning}); default {default}"
    )


def resolve_size(size: str, presets: Mapping[str, dict[str, Any]], number_key: str) -> dict[str, Any]:
    """The preset called ``size``, or the ``small`` preset with ``number_key`` set to ``size`` as a number."""
    if size in presets:
        return dict(presets[size])
    try:
        number = float(size)
    except ValueError:
        raise SystemExit(f"--size must be one of {sorted(presets)} or a number, got {size!r}") from None
    if number <= 0 or number != int(number):
        raise SystemExit(f"--size as a number must be a positive integer, got {size!r}")
    return {**presets["small"], number_key: int(number)}


def output_argument(parser: argparse.ArgumentParser, name: str) -> None:
    parser.add_argument(
        "--output", type=Path, default=RESULTS_DIR / f"{name}.json", help=f"default benchmarks/results/{name}.json"
    )


def _cell(value: Any, fmt: str | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if fmt:
        return format(value, fmt)
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def format_table(rows: Sequence[Mapping[str, Any]], columns: Iterable[str | tuple[str, str]]) -> str:
    """Right-aligned plain-text table; a column is a key or ``(key, format spec)``."""
    specs = [(c, None) if isinstance(c, str) else c for c in columns]
    cells = [[_cell(row.get(key), fmt) for key, fmt in specs] for row in rows]
    widths = [max([len(key)] + [len(r[i]) for r in cells]) for i, (key, _) in enumerate(specs)]
    lines = ["  ".join(key.rjust(w) for (key, _), w in zip(specs, widths, strict=True))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(lines)


def print_table(rows: Sequence[Mapping[str, Any]], columns: Iterable[str | tuple[str, str]]) -> None:
    print(format_table(rows, columns), flush=True)


def _display_path(path: Path) -> str:
    """Paths inside the repository relative to it, so results files do not name the machine's folders."""
    try:
        return str(path.resolve().relative_to(RESULTS_DIR.parents[1]))
    except ValueError:
        return str(path)


def write_results(output: Path, name: str, args: argparse.Namespace | dict, rows: list[dict], **extra: Any) -> Path:
    """Writes ``{"benchmark", "machine", "args", "rows", **extra}`` as JSON (load average read now, at the end)."""
    settings = vars(args) if isinstance(args, argparse.Namespace) else dict(args)
    payload = {
        "benchmark": name,
        "machine": machine_info(),
        "args": {k: _display_path(v) if isinstance(v, Path) else v for k, v in settings.items()},
        "rows": rows,
        **extra,
    }
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(payload, indent=2, default=str) + "\n")
    print(f"wrote {output}", flush=True)
    return output


def init_ray() -> None:
    """Ray for the in-process algorithms (the CLI's settings: no dashboard, quiet workers)."""
    from rllib_llm.run.cli import init_ray as cli_init_ray

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    cli_init_ray()


def save_plot(
    path: Path,
    panels: Sequence[dict[str, Any]],
    title: str = "",
) -> Path:
    """Line plots side by side (matplotlib, Agg): each panel is ``{"xlabel", "ylabel", "lines"}`` with lines
    ``{"label", "x", "y"}`` and optionally ``"spread"`` (a band of +-spread around y)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.ticker import MaxNLocator

    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4), squeeze=False)
    for ax, panel in zip(axes[0], panels, strict=True):
        for line in panel["lines"]:
            x, y = np.asarray(line["x"], dtype=float), np.asarray(line["y"], dtype=float)
            (drawn,) = ax.plot(x, y, marker="o" if len(x) <= 20 else None, label=line["label"])
            if line.get("spread") is not None:
                spread = np.asarray(line["spread"], dtype=float)
                ax.fill_between(x, y - spread, y + spread, color=drawn.get_color(), alpha=0.2)
        if all(float(v).is_integer() for line in panel["lines"] for v in line["x"]):
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel(panel["xlabel"])
        ax.set_ylabel(panel["ylabel"])
        ax.grid(alpha=0.3)
        ax.legend()
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"wrote {path}", flush=True)
    return path


def threads_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch CPU threads (0: torch's default). Default 1: on a shared, oversubscribed machine two "
        "threads that wait for each other ran up to 10x slower than one",
    )


def apply_threads(threads: int) -> None:
    """Sets torch's intra-op threads (0 leaves torch's default)."""
    if threads:
        import torch

        torch.set_num_threads(threads)


MAIN_JOB = Path(__file__).resolve().parents[1] / "tuned_examples" / "numberline_gigpo.py"


def main_job_stop() -> dict[str, Any]:
    """The main job's ``stop`` dict (its number of training iterations)."""
    from rllib_llm.run.cli import load_tuned_example

    return load_tuned_example(str(MAIN_JOB))[1]


def main_job_config(model: str | None = None) -> Any:
    """A copy of the main job's tuned example (GiGPO, NumberLine, embedded model), optionally on another
    model with the same model settings (e.g. trainable_layers), so benchmarks measure what users run."""
    from rllib_llm.run.cli import load_tuned_example

    config, _ = load_tuned_example(str(MAIN_JOB))
    config = config.copy(copy_frozen=False)
    if model:
        config.llm(model={**config.llm_model, "name_or_path": model})
    return config

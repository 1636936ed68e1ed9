"""The report of real-model learning runs (issue 43): held-out success before/after, curves with spread.

    python benchmarks/real_model_report.py --name real_model_search \\
        --run "GiGPO lr 5e-5=runs/search_s0" --run "GiGPO lr 5e-5=runs/search_s1" --run "GiGPO lr 1e-5=runs/a" \\
        --card "H100 80GB" --model-sha256 1d96... --note "how the runs were started"

Each ``--run LABEL=FOLDER`` is one ``rllib-llm train ... --output FOLDER`` run folder (``progress.jsonl``,
``summary.json`` when it finished, ``trajectories.jsonl`` when it kept some); runs with one label are the seeds
of one variant. Writes ``benchmarks/results/<name>.{md,json,png}``: per run the untrained and trained greedy
success on the held-out seeds, iterations, minutes of training, how many of the saved training episodes in the
first and last ten iterations used a tool (a ``<search>`` call; any env whose actions carry ``--tool-tag``); per
variant the mean and spread of the trained success; the curves of each variant's training success (mean of its
seeds, a 5-iteration moving average, the band spanning its seeds).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import RESULTS_DIR, format_table, save_plot  # noqa: E402


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def tool_use(episodes: list[dict[str, Any]], tag: str) -> tuple[int, int]:
    """(episodes with an action that holds ``tag``, episodes)."""
    used = sum(any(tag in (step.get("action") or "") for step in ep.get("steps", [])) for ep in episodes)
    return used, len(episodes)


def run_row(label: str, folder: Path, tag: str) -> dict[str, Any]:
    """One run folder's numbers (``after`` is None for a run that did not reach its final evaluation)."""
    progress = read_jsonl(folder / "progress.jsonl")
    summary_file = folder / "summary.json"
    summary = json.loads(summary_file.read_text()) if summary_file.exists() else {}
    episodes = read_jsonl(folder / "trajectories.jsonl")
    last = max((ep["iteration"] for ep in episodes), default=0)
    early = tool_use([ep for ep in episodes if ep["iteration"] <= 10], tag)
    late = tool_use([ep for ep in episodes if ep["iteration"] > last - 10], tag)
    return {
        "label": label,
        "run": folder.name,
        "before": (summary.get("before") or {}).get("success_rate"),
        "after": (summary.get("after") or {}).get("success_rate"),
        "episode_len_before": (summary.get("before") or {}).get("episode_len_mean"),
        "episode_len_after": (summary.get("after") or {}).get("episode_len_mean"),
        "iterations": len(progress),
        "minutes": sum(p.get("time_s", 0.0) for p in progress) / 60,
        "tool_first10": f"{early[0]}/{early[1]}",
        "tool_last10": f"{late[0]}/{late[1]}",
        "curve": [(int(p["iter"]), p["success"]) for p in progress],
    }


def moving_average(values: list[float], window: int = 5) -> list[float]:
    return [statistics.fmean(values[max(0, k - window + 1): k + 1]) for k in range(len(values))]


def variants(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per label: seeds, trained success mean / min / max / std over the runs that finished, the mean curve."""
    by_label: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_label[row["label"]].append(row)
    out = []
    for label, runs in by_label.items():
        after = [r["after"] for r in runs if r["after"] is not None]
        before = [r["before"] for r in runs if r["before"] is not None]
        length = min(len(r["curve"]) for r in runs)
        per_iter = [[r["curve"][i][1] for r in runs] for i in range(length)]
        out.append({
            "label": label,
            "runs": len(runs),
            "finished": len(after),
            "before_mean": statistics.fmean(before) if before else None,
            "after_mean": statistics.fmean(after) if after else None,
            "after_min": min(after) if after else None,
            "after_max": max(after) if after else None,
            "after_std": statistics.pstdev(after) if len(after) > 1 else 0.0 if after else None,
            "curve_mean": moving_average([statistics.fmean(v) for v in per_iter]),
            "curve_low": moving_average([min(v) for v in per_iter]),
            "curve_high": moving_average([max(v) for v in per_iter]),
        })
    return out


def report(name: str, rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    summary = variants(rows)
    runs_table = format_table(
        rows, ["label", "run", ("before", ".3f"), ("after", ".3f"), ("episode_len_after", ".2f"), "iterations",
               ("minutes", ".1f"), "tool_first10", "tool_last10"])
    variants_table = format_table(
        summary, ["label", "runs", "finished", ("before_mean", ".3f"), ("after_mean", ".3f"), ("after_min", ".3f"),
                  ("after_max", ".3f"), ("after_std", ".3f")])
    lines = [
        f"# {name} (generated by benchmarks/real_model_report.py)", "",
        f"Card: {args.card}. Model: {args.model} (sha256 {args.model_sha256}).", "",
        args.note, "",
        "Runs (`before`/`after`: greedy success on the held-out seeds; `tool_*`: saved training episodes with a "
        f"`{args.tool_tag}` action in the first / last ten iterations; `after` empty: the run's final evaluation "
        "did not come back):", "", "```", runs_table, "```", "", "Variants:", "", "```", variants_table, "```", "",
        f"Curves: `{name}.png` (training success of the sampled episodes, temperature 1; the mean of a variant's "
        "runs, 5-iteration moving average, the band spans its runs).",
    ]
    RESULTS_DIR.mkdir(exist_ok=True)
    (RESULTS_DIR / f"{name}.md").write_text("\n".join(lines) + "\n")
    (RESULTS_DIR / f"{name}.json").write_text(json.dumps(
        {"benchmark": name, "card": args.card, "model": args.model, "model_sha256": args.model_sha256,
         "note": args.note, "rows": rows, "variants": summary}, indent=1) + "\n")
    print("\n".join(lines))
    lines_to_plot = [
        {"label": v["label"], "x": list(range(1, len(v["curve_mean"]) + 1)), "y": v["curve_mean"],
         "spread": [(hi - lo) / 2 for lo, hi in zip(v["curve_low"], v["curve_high"], strict=True)]}
        for v in summary
    ]
    save_plot(RESULTS_DIR / f"{name}.png",
              [{"xlabel": "iteration", "ylabel": "training success (sampled)", "lines": lines_to_plot}],
              title=f"{name}: {args.model}, {args.card}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--name", required=True, help="results stem: benchmarks/results/<name>.{md,json,png}")
    parser.add_argument("--run", action="append", required=True, help="LABEL=RUN_FOLDER (repeat per run)")
    parser.add_argument("--card", default="")
    parser.add_argument("--model", default="")
    parser.add_argument("--model-sha256", default="")
    parser.add_argument("--tool-tag", default="<search>")
    parser.add_argument("--note", default="")
    args = parser.parse_args()
    rows = []
    for spec in args.run:
        label, sep, folder = spec.partition("=")
        if not sep or not Path(folder, "progress.jsonl").exists():
            parser.error(f"--run {spec!r}: expected LABEL=FOLDER with a progress.jsonl in FOLDER")
        rows.append(run_row(label, Path(folder), args.tool_tag))
    report(args.name, rows, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

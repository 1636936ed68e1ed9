"""The main job on several seeds, as a user runs it: does learning hold on every seed? (issue 48's CPU bar)

    python benchmarks/learning_seeds.py                      # seeds 0-9, one after the other (~2.2 h on 2 cores)
    python benchmarks/learning_seeds.py --seeds 0 1 --runs-dir /tmp/seeds
    python benchmarks/learning_seeds.py --collect /tmp/seeds  # only the report, from finished run folders
    python benchmarks/learning_seeds.py --example tuned_examples/ezpoints_gigpo.py --seeds 0 1 2
                                         # another tuned example: learning_seeds_<example>.{json,md,png}, no bar

Each seed is ``rllib-llm train tuned_examples/numberline_gigpo.py --seed S --no-tracking --output RUNS/sS`` in a
subprocess (the README's command plus ``--seed``), timed with the load average before and after. The report
(``benchmarks/results/learning_seeds.{json,md,png}``) has every seed's untrained and trained greedy success on
the held-out seeds, its wall time, the mean and spread, whether the bar holds (every seed >= 0.80 and >= its
untrained success + 0.25, mean >= 0.90, each run <= 15 min), and the training curves (success of the
iteration's sampled episodes per seed, held-out greedy success before/after as markers). The GPU-sized version
and GiGPO vs GRPO on the H200 are ``benchmarks/gpu_sweep.py``, one process per seed (``learning_seeds_gpu.*``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import RESULTS_DIR, format_table, load_average, machine_info  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = "tuned_examples/numberline_gigpo.py"
BAR = {"min_success": 0.80, "min_gain": 0.25, "min_mean": 0.90, "max_minutes": 15.0}


def run_seed(seed: int, runs_dir: Path, example: str = EXAMPLE) -> None:
    """One seed through the CLI; its wall time and load go to ``timing.json`` in the run folder."""
    output = runs_dir / f"s{seed}"
    load_before, start = load_average(), time.perf_counter()
    cmd = [sys.executable, "-m", "rllib_llm.run.cli", "train", example, "--seed", str(seed), "--no-tracking", "--overwrite",
           "--output", str(output)]
    print("+", " ".join(cmd), flush=True)
    with open(runs_dir / f"s{seed}.log", "w") as log:
        rc = subprocess.run(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env={**os.environ}).returncode
    timing = {"wall_s": time.perf_counter() - start, "load_before": load_before, "load_after": load_average(), "rc": rc}
    (output / "timing.json").write_text(json.dumps(timing))


def collect(runs_dir: Path) -> list[dict[str, Any]]:
    rows = []
    for folder in sorted(runs_dir.glob("s[0-9]*")):
        summary_file = folder / "summary.json"
        if not folder.is_dir() or not summary_file.exists():
            continue
        summary = json.loads(summary_file.read_text())
        timing_file = folder / "timing.json"
        timing = json.loads(timing_file.read_text()) if timing_file.exists() else {}
        progress = [json.loads(line) for line in (folder / "progress.jsonl").read_text().splitlines() if line.strip()]
        rows.append({
            "seed": int(folder.name[1:]),
            "before": summary["before"]["success_rate"],
            "after": summary["after"]["success_rate"],
            "valid_after": summary["after"]["valid_action_rate"],
            "iterations": summary.get("iterations_done"),
            "minutes": timing["wall_s"] / 60 if "wall_s" in timing else None,
            "load_before": timing.get("load_before"),
            "load_after": timing.get("load_after"),
            "curve": [(p["iter"], p["success"]) for p in progress],
        })
    return sorted(rows, key=lambda r: r["seed"])


def verdict(rows: list[dict[str, Any]]) -> dict[str, Any]:
    afters = [r["after"] for r in rows]
    checks = {
        f"every seed >= {BAR['min_success']:.2f}": all(a >= BAR["min_success"] for a in afters),
        f"every seed >= untrained + {BAR['min_gain']:.2f}": all(r["after"] >= r["before"] + BAR["min_gain"] for r in rows),
        f"mean >= {BAR['min_mean']:.2f}": statistics.fmean(afters) >= BAR["min_mean"],
        "every run <= 15 min": all(r["minutes"] is not None and r["minutes"] <= BAR["max_minutes"] for r in rows),
    }
    return {
        "seeds": [r["seed"] for r in rows],
        "mean_after": statistics.fmean(afters),
        "min_after": min(afters),
        "max_after": max(afters),
        "std_after": statistics.pstdev(afters) if len(afters) > 1 else 0.0,
        "checks": checks,
        "bar_holds": all(checks.values()),
    }


def report(rows: list[dict[str, Any]], note: str = "", example: str = EXAMPLE) -> None:
    """The table, the verdict (issue 48's bar, for the main job only) and the curves, under
    ``learning_seeds`` (the main job) or ``learning_seeds_<example stem>``."""
    main_job = example == EXAMPLE
    stem = "learning_seeds" if main_job else f"learning_seeds_{Path(example).stem}"
    summary = verdict(rows)
    table = format_table(
        [{**r, "load": f"{r['load_before'][0] if r['load_before'] else '-'} -> {r['load_after'][0] if r['load_after'] else '-'}"}
         for r in rows],
        ["seed", ("before", ".3f"), ("after", ".3f"), ("valid_after", ".3f"), "iterations", ("minutes", ".1f"), "load"],
    )
    checks = "\n".join(f"- {name}: {'yes' if ok else 'NO'}" for name, ok in summary["checks"].items())
    lines = [
        f"# {stem} (generated by benchmarks/learning_seeds.py)", "",
        f"`rllib-llm train {example} --seed S`{' (the README' + chr(39) + 's main job)' if main_job else ''} on seeds "
        f"{summary['seeds']}: greedy success on "
        "the 64 held-out seeds before and after training (the same seeds for every run), wall time of the whole "
        "command (model load, both evaluations, training) with the 1-minute load average before -> after.", "",
        note, "", "```", table, "```", "",
        f"Trained success: mean {summary['mean_after']:.3f}, min {summary['min_after']:.3f}, max "
        f"{summary['max_after']:.3f}, std {summary['std_after']:.3f}."
        + (" Reference: always `+` scores 0.453, always `-` 0.547 on these seeds." if main_job else ""), "",
        *(["Bar (issue 48):", checks, ""] if main_job else []),
        f"Curves: `{stem}.png` (success of each iteration's sampled training episodes, temperature 1; "
        "the held-out greedy success before/after as markers at iterations 0 and the last).",
    ]
    RESULTS_DIR.mkdir(exist_ok=True)
    (RESULTS_DIR / f"{stem}.md").write_text("\n".join(lines) + "\n")
    (RESULTS_DIR / f"{stem}.json").write_text(json.dumps(
        {"benchmark": stem, "example": example, "machine": machine_info(), "bar": BAR if main_job else None,
         "summary": summary, "rows": rows, "note": note}, indent=1) + "\n")
    print("\n".join(lines))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(8, 4))
    for i, row in enumerate(rows):
        color = f"C{i}"
        its, success = zip(*row["curve"], strict=True) if row["curve"] else ((), ())
        ax.plot(its, success, color=color, alpha=0.35, linewidth=1)
        if len(success) >= 5:  # a 5-iteration moving average, for legibility
            smooth = [statistics.fmean(success[max(0, k - 4): k + 1]) for k in range(len(success))]
            ax.plot(its, smooth, color=color, linewidth=2, label=f"seed {row['seed']} (training episodes)")
        ax.scatter([0, row["iterations"]], [row["before"], row["after"]], color=color, marker="D", zorder=3)
    if main_job:
        ax.axhline(0.547, color="grey", linestyle=":", linewidth=1)
        ax.text(0.5, 0.56, "best constant policy (held-out)", color="grey", fontsize=8)
    ax.set_xlabel("iteration")
    ax.set_ylabel("success rate")
    ax.set_ylim(0, 1.05)
    what = "Main job (GiGPO, NumberLine, " if main_job else f"{Path(example).name} ("
    ax.set_title(f"{what}SmolLM2-135M + LoRA, CPU)\n"
                 "lines: training episodes; diamonds: held-out greedy success before / after", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(RESULTS_DIR / f"{stem}.png", dpi=90)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(10)))
    parser.add_argument("--runs-dir", type=Path, default=ROOT / "runs" / "learning_seeds")
    parser.add_argument("--collect", type=Path, default=None, help="only report the finished runs in this folder")
    parser.add_argument("--note", default="")
    parser.add_argument("--example", default=EXAMPLE, help="the tuned example (default: the main job)")
    args = parser.parse_args()
    runs_dir = args.collect or args.runs_dir
    if args.collect is None:
        runs_dir.mkdir(parents=True, exist_ok=True)
        for seed in args.seeds:
            run_seed(seed, runs_dir, args.example)
    rows = collect(runs_dir)
    if not rows:
        print(f"no finished runs in {runs_dir}", file=sys.stderr)
        return 1
    report(rows, args.note, args.example)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Learning curves: success rate against iterations and wall-clock, GiGPO against GRPO, several seeds.

    python benchmarks/learning.py                                   # NumberLine, seeds 0 1, small (CPU)
    python benchmarks/learning.py --size medium --seeds 0 1 2       # the main job's groups and iterations
    python benchmarks/learning.py --env Sokoban --size medium --seeds 0 1 2

Why: GiGPO's claim is that its step-level advantage (over steps that share an anchor state) learns faster
than GRPO's episode-level advantage alone, the baseline a user would pick. Both run the main job's tuned
example (tuned_examples/numberline_gigpo.py: embedded SmolLM2-135M-Instruct, LoRA adapters on every layer) with
the same rollouts and hyperparameters; only the advantage estimator differs. Sokoban (6x6, one box, one
in-context example) reuses it with Sokoban's own prompt template and a 2-step sliding-window memory.

The success rate per iteration is that of the iteration's training rollouts (sampled, temperature 1, as
verl-agent plots it); with ``--eval-seeds N`` (medium: the main job's, large: 32) the greedy success on N
held-out seeds is measured before the first and after the last iteration. Wall-clock is the time spent in
``algo.train()`` (building and evaluation excluded). ``--size``: small (3 iterations of 2 groups x 2
envs), medium (the main job's groups, iterations and held-out seeds, read from the tuned example: 3 x 4,
16 iterations, 64 seeds now), large (30 iterations of 4 x 8), or a number of iterations
at the small group sizes. Writes benchmarks/results/learning[_<env>].json and .png.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: `benchmarks._common` importable

from benchmarks._common import (  # noqa: E402
    RESULTS_DIR,
    apply_threads,
    init_ray,
    load_1m,
    main_job_config,
    main_job_stop,
    print_table,
    resolve_size,
    save_plot,
    size_argument,
    threads_argument,
    write_results,
)
from rllib_llm.algorithms import GRPO  # noqa: E402
from rllib_llm.env_connectors import ChatPromptBuilder, SlidingWindowMemory  # noqa: E402

NAME = "learning"
SMALL = {"iterations": 3, "num_groups": 2, "group_size": 2, "eval_seeds": 0}
LARGE = {"iterations": 30, "num_groups": 4, "group_size": 8, "eval_seeds": 32}


def presets() -> dict[str, dict[str, int]]:
    """small, medium (the main job as it is: its groups, iterations and held-out seeds) and large."""
    config = main_job_config()
    medium = {
        "iterations": int(main_job_stop().get("training_iteration", 10)),
        "num_groups": config.num_groups,
        "group_size": config.group_size,
        "eval_seeds": config.evaluation_num_seeds,
    }
    return {"small": SMALL, "medium": medium, "large": LARGE}


ALGOS = ("gigpo", "grpo")
SOKOBAN = {"dim_room": (6, 6), "num_boxes": 1, "max_steps": 8, "min_solution_length": 2}


def sokoban(config: Any) -> Any:
    """The tuned example moved to Sokoban: the env's template, a 2-step memory, a one-shot format example."""
    from rllib_llm.envs.sokoban import SokobanEnv

    example, _ = SokobanEnv(**SOKOBAN).reset(seed=0)
    return (
        config.environment("Sokoban", env_config=SOKOBAN)
        .env_runners(env_to_module_connector=lambda *_: [SlidingWindowMemory(window=2), ChatPromptBuilder()])
        .generation(max_new_tokens=24)
        .group_rollouts(max_episode_steps=SOKOBAN["max_steps"], few_shot=[(example, "<action>down</action>")])
    )


ENVS = {"NumberLine": lambda config: config, "Sokoban": sokoban}


def make_config(env: str, algo: str, model: str | None, size: dict[str, Any], seed: int) -> Any:
    """The tuned example for ``env`` at ``size``; GRPO is the same config with GRPO's estimator."""
    config = ENVS[env](main_job_config(model))
    config.group_rollouts(group_size=size["group_size"], num_groups=size["num_groups"])
    config.evaluation(evaluation_num_seeds=max(size["eval_seeds"], 1)).debugging(seed=seed)
    if algo == "grpo":
        config.algo_class = GRPO
        config.training(advantage_estimator="grpo")
    config.validate()
    return config


def run(env: str, algo: str, model: str | None, size: dict[str, Any], seed: int) -> dict[str, Any]:
    """Trains one (algo, seed): per-iteration rows, plus held-out success before and after."""
    algo_obj = make_config(env, algo, model, size, seed).build_algo()
    rows: list[dict[str, Any]] = []
    record: dict[str, Any] = {"algo": algo, "seed": seed, "estimator": algo_obj.config.advantage_estimator}
    try:
        if size["eval_seeds"]:
            record["eval_before"] = algo_obj.evaluate_seeds()["success_rate"]
        wall = 0.0
        for _ in range(size["iterations"]):
            start = time.perf_counter()
            result = algo_obj.train()
            wall += time.perf_counter() - start
            runners = result.get("env_runners", {})
            rows.append(
                {
                    "algo": algo,
                    "seed": seed,
                    "iteration": int(result["training_iteration"]),
                    "success_rate": float(runners.get("success_rate", float("nan"))),
                    "valid_action_rate": float(runners.get("valid_action_rate", float("nan"))),
                    "episode_return_mean": float(runners.get("episode_return_mean", float("nan"))),
                    "iteration_s": time.perf_counter() - start,
                    "wall_s": wall,
                    "load_avg_1m": load_1m(),
                }
            )
            print(
                f"  {algo} seed {seed} iter {rows[-1]['iteration']}: success {rows[-1]['success_rate']:.2f}, "
                f"{rows[-1]['iteration_s']:.0f} s (load {rows[-1]['load_avg_1m']})",
                flush=True,
            )
        if size["eval_seeds"]:
            record["eval_after"] = algo_obj.evaluate_seeds()["success_rate"]
    finally:
        algo_obj.stop()
        del algo_obj
        gc.collect()
    return {**record, "rows": rows}


#: Per-iteration metrics averaged over seeds (mean and std) in the summary's curves.
CURVE_METRICS = ("success_rate", "valid_action_rate", "wall_s")


def curves(rows: list[dict[str, Any]]) -> dict[str, dict[str, list[float]]]:
    """Per algo and iteration: mean and std over seeds of each of :data:`CURVE_METRICS`."""
    out: dict[str, dict[str, list[float]]] = {}
    for algo in dict.fromkeys(r["algo"] for r in rows):
        mine = [r for r in rows if r["algo"] == algo]
        iterations = sorted({r["iteration"] for r in mine})
        at = [[r for r in mine if r["iteration"] == i] for i in iterations]
        curve: dict[str, list[float]] = {"iteration": iterations, "seeds": [len(group) for group in at]}
        for metric in CURVE_METRICS:
            values = [[r[metric] for r in group] for group in at]
            curve[f"{metric}_mean"] = [float(np.mean(v)) for v in values]
            curve[f"{metric}_std"] = [float(np.std(v)) for v in values]
        out[algo] = curve
    return out


def plot(summary: dict[str, Any], path: Path, title: str) -> Path:
    """Success against iterations and wall-clock, valid-action rate against iterations (mean +- std)."""

    def panel(x: str, metric: str, xlabel: str, ylabel: str) -> dict[str, Any]:
        lines = [
            {"label": algo, "x": c[x], "y": c[f"{metric}_mean"], "spread": c[f"{metric}_std"]}
            for algo, c in summary["curves"].items()
        ]
        return {"xlabel": xlabel, "ylabel": ylabel, "lines": lines}

    return save_plot(
        path,
        [
            panel("iteration", "success_rate", "iteration", "success rate (training rollouts)"),
            panel("wall_s_mean", "success_rate", "wall-clock in train() (s)", "success rate (training rollouts)"),
            panel("iteration", "valid_action_rate", "iteration", "valid-action rate"),
        ],
        title=title,
    )


def summarize(env: str, size: dict[str, Any], runs: list[dict[str, Any]]) -> dict[str, Any]:
    rows = [row for r in runs for row in r["rows"]]
    return {
        "env": env,
        **size,
        "curves": curves(rows),
        "runs": [{k: v for k, v in r.items() if k != "rows"} for r in runs],  # with held-out success if evaluated
        "load_avg_1m_range": [min(r["load_avg_1m"] for r in rows), max(r["load_avg_1m"] for r in rows)],
    }


def report(results: dict[str, Any], output: Path) -> None:
    """Prints the mean curves and draws the PNG next to ``output``."""
    summary = results["summary"]
    table = [
        {"algo": algo, **{key: values[i] for key, values in c.items()}}
        for algo, c in summary["curves"].items()
        for i in range(len(c["iteration"]))
    ]
    columns = ["algo", "iteration", "seeds", ("success_rate_mean", ".3f"), ("success_rate_std", ".3f")]
    print_table(table, [*columns, ("valid_action_rate_mean", ".3f"), ("wall_s_mean", ".0f")])
    seeds = sorted({r["seed"] for r in results["rows"]})
    title = f"{summary['env']}: mean +- std over seeds {seeds}, load avg {summary['load_avg_1m_range']}"
    plot(summary, output.with_suffix(".png"), title)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    size_argument(parser, "training iterations at the small group sizes")
    parser.add_argument("--env", choices=sorted(ENVS), default="NumberLine")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--algos", nargs="+", choices=ALGOS, default=list(ALGOS))
    parser.add_argument("--model", help="default: the tuned example's (smollm2-135m-instruct)")
    parser.add_argument("--eval-seeds", type=int, help="held-out seeds evaluated before and after (0: none)")
    threads_argument(parser)
    parser.add_argument("--output", type=Path, help="default benchmarks/results/learning[_<env>].json")
    parser.add_argument("--replot", action="store_true", help="only redo the summary and PNG of --output's rows")
    args = parser.parse_args(argv)
    size = resolve_size(args.size, presets(), "iterations")
    if args.eval_seeds is not None:
        size["eval_seeds"] = args.eval_seeds
    suffix = "" if args.env == "NumberLine" else f"_{args.env.lower()}"
    output = args.output or RESULTS_DIR / f"{NAME}{suffix}.json"
    if args.replot:
        results = json.loads(output.read_text())
        results["summary"]["curves"] = curves(results["rows"])
        output.write_text(json.dumps(results, indent=2) + "\n")
        report(results, output)
        return results
    apply_threads(args.threads)
    init_ray()
    runs = []
    for seed in args.seeds:  # seed-major: both algorithms see the same load drift
        for algo in args.algos:
            runs.append(run(args.env, algo, args.model, size, seed))
    rows = [row for r in runs for row in r["rows"]]
    summary = summarize(args.env, size, runs)
    write_results(output, NAME, {**vars(args), "output": output}, rows, summary=summary)
    report({"rows": rows, "summary": summary}, output)
    return {"rows": rows, "summary": summary}


if __name__ == "__main__":
    main()

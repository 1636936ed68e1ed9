"""Named config variants of the CPU main job, trained side by side on one GPU: eval success, entropy, P("+").

Every run is (variant, algorithm, seed): the main job's tuned example (``tuned_examples/numberline_gigpo.py``,
loaded, not copied) with the overrides of :data:`VARIANTS`, the estimator of ``--algos`` (GRPO = the same
config with GRPO's estimator) and ``--env`` (``Sokoban``: ``benchmarks/learning.py``'s Sokoban version of
it). All runs of a process train in one process and one Ray, an iteration of each in turn, so a time-budget
stop leaves them equally far. Precision defaults to float32 for both the Learner and the EnvRunner
(``inference_dtype``), so the numerics match the CPU job. Greedy evaluation on ``--eval-seeds`` held-out
seeds before training and after each iteration of ``--eval-at``; on NumberLine each evaluation also scores
the canonical responses ``<action>+</action>`` / ``<action>-</action>`` under the EnvRunner's weights for
every start state the evaluation met (P("+") per state: a policy that answers "+" everywhere has
P("+") near 1 also where the target lies below the pointer).

Every iteration/evaluation appends one JSON line to ``OUT/<tag>.jsonl`` at once (all runs of the process in
one file), so a cut-off run still leaves curves; ``--report DIR`` turns the JSONL files of DIR into
``<stem>.json`` + ``<stem>.md`` (+ ``<stem>.png``).

Job 1 (sweep, per seed one process):
``python benchmarks/gpu_sweep.py --out $OUT/sweep --tag s0 --seeds 0 --variants base mean mean_lr5e-5 mean_kl
mean_2shot mean_g8 mean_ent --iterations 16 --eval-at 8 16 --eval-seeds 64``
Learning at GPU size: ``... --algos gigpo grpo --variants mean --num-groups 8 --group-size 8 --iterations 20
--eval-at 10 20 [--env Sokoban]``.
CPU dry run (tiny model): add ``--model tiny-random-llama --iterations 1 --eval-at 1 --eval-seeds 4``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import _cell, machine_info  # noqa: E402
from benchmarks.gpu_training import ITERATION_KEYS, _pick  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TUNED_EXAMPLE = ROOT / "tuned_examples" / "numberline_gigpo.py"
ALGOS = ("gigpo", "grpo")
ENVS = ("NumberLine", "Sokoban")
RECORD_KEYS = {**ITERATION_KEYS, "kl": ("learners", "kl"), "total_loss": ("learners", "total_loss")}
TWO_SHOT = [("Target 1, position 3.", "<action>-</action>"), ("Target 4, position 2.", "<action>+</action>")]


def _mean(config):
    return config.training(advantage_norm="mean")


#: Named variants of earlier sweeps -> the tokens they stand for (see :func:`apply_variant`).
VARIANTS: dict[str, str] = {
    "base": "",
    "mean": "mean",
    "mean_lr5e-5": "mean+lr5e-5",
    "mean_kl": "mean+kl0.01",
    "mean_2shot": "mean+2shot",
    "mean_g8": "mean+g3x8",
    "mean_ent": "mean+ent0.01",
    "mean_kl_2shot": "mean+kl0.01+2shot",
}

_NUMBER = r"(\d+(?:\.\d*)?(?:e-?\d+)?)"
#: Variant tokens: regex -> override of the config (the match's groups as strings).
TOKENS: list[tuple[str, Callable[..., Any]]] = [
    (r"mean", lambda c: c.training(advantage_norm="mean")),
    (r"std", lambda c: c.training(advantage_norm="std")),
    (r"2shot", lambda c: c.group_rollouts(few_shot=TWO_SHOT)),
    (r"grpo", lambda c: c.training(advantage_estimator="grpo")),
    (r"prefix", lambda c: c.group_rollouts(response_prefix="<action>")),
    (r"lr" + _NUMBER, lambda c, v: c.training(lr=float(v))),
    # Learning-rate warm-up over the first N sampled env steps (RLlib lr schedule, from a tenth of the lr).
    (r"wu(\d+)", lambda c, n: c.training(lr=[[0, _final_lr(c) / 10], [int(n), _final_lr(c)]])),
    (r"kl" + _NUMBER, lambda c, v: c.training(kl_coeff=float(v))),
    (r"ent" + _NUMBER, lambda c, v: c.training(entropy_coeff=float(v))),
    (r"gamma" + _NUMBER, lambda c, v: c.training(gamma=float(v))),
    (r"omega" + _NUMBER, lambda c, v: c.training(step_advantage_weight=float(v))),
    (r"clip" + _NUMBER, lambda c, v: c.training(clip_ratio_low=float(v), clip_ratio_high=float(v))),
    (r"ep(\d+)", lambda c, v: c.training(num_epochs=int(v))),
    (r"mb(\d+)", lambda c, v: c.training(minibatch_size=int(v))),
    (r"mball", lambda c: c.training(minibatch_size=None)),  # the whole batch: one optimizer step per epoch
    (r"micro(\d+)", lambda c, v: c.training(micro_batch_size=int(v))),
    (r"g(\d+)x(\d+)", lambda c, g, n: c.group_rollouts(num_groups=int(g), group_size=int(n))),
    (r"T" + _NUMBER, lambda c, v: c.generation(temperature=float(v))),
    (r"away" + _NUMBER + "?", lambda c, v: c.environment(env_config={**c.env_config, "away_penalty": -float(v or 1)})),
    (r"line(\d+)", lambda c, v: c.environment(env_config={**c.env_config, "max_position": int(v)})),
    (r"steps(\d+)", lambda c, v: c.environment(env_config={**c.env_config, "max_steps": int(v)}).group_rollouts(
        max_episode_steps=int(v))),
    (r"layers(\d+)", lambda c, v: c.llm(model={**c.llm_model, "trainable_layers": int(v) or None})),
    (r"lora(\d+)", lambda c, r: c.llm(model={**c.llm_model, "lora": {
        "r": int(r), "lora_alpha": 2 * int(r), "target_modules": LORA_TARGETS}})),
]
LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def _final_lr(config: Any) -> float:
    """The lr a schedule ends at (the lr itself when it is a number)."""
    return float(config.lr[-1][1]) if isinstance(config.lr, list) else float(config.lr)


def apply_variant(config: Any, variant: str) -> Any:
    """A variant is a name of :data:`VARIANTS` or ``+``-joined tokens of :data:`TOKENS` applied left to
    right, e.g. ``mean+lr2e-5+g6x4+away`` (``away`` = RL4VLM's -1 for a move that does not get closer,
    ``layers0`` = train every layer, ``lora16`` = LoRA r=16 on every projection)."""
    import re

    for token in filter(None, VARIANTS.get(variant, variant).split("+")):
        for pattern, override in TOKENS:
            match = re.fullmatch(pattern, token)
            if match:
                config = override(config, *match.groups())
                break
        else:
            raise ValueError(f"unknown variant token {token!r} in {variant!r}; tokens: {[p for p, _ in TOKENS]}")
    return config


def _probe_config() -> Any:
    from rllib_llm.algorithms import GiGPOConfig

    return GiGPOConfig().environment("NumberLine")


def run_name(variant: str, algo: str, seed: int, env: str) -> str:
    env_part = "" if env == "NumberLine" else f"{env.lower()}_"
    return f"{env_part}{variant}_{algo}_s{seed}"


def build_config(variant: str, algo: str, seed: int, args: argparse.Namespace, on_gpu: bool):
    from rllib_llm.algorithms.grpo import GRPO
    from rllib_llm.run.cli import load_tuned_example

    config, _ = load_tuned_example(TUNED_EXAMPLE)
    config = config.copy(copy_frozen=False)
    if args.env == "Sokoban":
        from benchmarks.learning import sokoban

        config = sokoban(config)
    if algo == "grpo":
        config.algo_class = GRPO
        config.training(advantage_estimator="grpo")
    model = {
        **config.llm_model,
        "name_or_path": args.model,
        "dtype": args.dtype,
        "inference_dtype": args.inference_dtype,
    }
    config.llm(model=model)
    sizes = {"group_size": args.group_size, "num_groups": args.num_groups}
    config.group_rollouts(**{k: v for k, v in sizes.items() if v is not None})
    if args.minibatch_size:
        config.training(minibatch_size=args.minibatch_size)
    config = apply_variant(config, variant)
    config.evaluation(evaluation_num_seeds=args.eval_seeds).debugging(seed=seed)
    if on_gpu:
        config.learners(num_gpus_per_learner=1).env_runners(num_gpus_per_env_runner=1)
    config.validate()
    return config


def _as_ids(value: Any) -> list[int]:
    return [int(v) for v in (value.tolist() if hasattr(value, "tolist") else value)]


def action_probabilities(algo: Any, episodes: list) -> list[dict[str, Any]]:
    """NumberLine: P("<action>+</action>") and P("<action>-</action>") (temperature 1) under the EnvRunner's
    weights for each distinct start state of ``episodes`` (the step-0 prompt the evaluation built)."""
    import torch

    from rllib_llm.columns import PROMPT

    runner = algo.env_runner
    model, tokenizer = runner.module.model, runner.module.tokenizer
    device = next(model.parameters()).device
    states: dict[str, list[int]] = {}
    for ep in episodes:
        states.setdefault(str(ep.get_observations(0)), _as_ids(ep.get_extra_model_outputs(PROMPT)[0]))
    prefix = algo.config.response_prefix  # prefilled: already at the end of the prompt
    replies = {a: f"<action>{a}</action>" for a in "+-"}
    responses = {a: tokenizer.encode(r[len(prefix):] if r.startswith(prefix) else r, add_special_tokens=False)
                 for a, r in replies.items()}
    rows = []
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for obs, prompt in sorted(states.items()):
            row: dict[str, Any] = {"state": obs}
            for action, response in responses.items():
                ids = torch.tensor([prompt + response], device=device)
                logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float()
                logp = torch.log_softmax(logits, -1).gather(-1, ids[0, len(prompt) :, None]).sum()
                row[f"p_{'plus' if action == '+' else 'minus'}"] = float(logp.exp())
            words = obs.replace(",", " ").replace(".", " ").split()  # "Target 1, position 3."
            try:
                target, position = int(words[1]), int(words[3])
                row["correct"] = "+" if target > position else "-"
            except (IndexError, ValueError):
                row["correct"] = None
            rows.append(row)
    model.train(was_training)
    return rows


def evaluate(algo: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Greedy play of the held-out seeds (as ``LLMAlgorithm.evaluate_seeds``), plus action statistics."""
    import numpy as np

    from rllib_llm.columns import RESPONSE_TEXT
    from rllib_llm.metrics import rollout_stats

    offset = algo.config.evaluation_seed_offset
    seeds = list(range(offset, offset + args.eval_seeds))
    episodes = algo.env_runner.sample(seeds=seeds, explore=False, group_size=1)
    prefix = algo.config.response_prefix  # prefilled, not generated: the reply is prefix + text
    texts = [prefix + str(t) for ep in episodes for t in ep.get_extra_model_outputs(RESPONSE_TEXT)]
    stats: dict[str, Any] = {
        **rollout_stats(episodes),
        "greedy_plus_rate": float(np.mean(["<action>+</action>" in t for t in texts])) if texts else None,
        "greedy_minus_rate": float(np.mean(["<action>-</action>" in t for t in texts])) if texts else None,
    }
    if args.env == "NumberLine":
        rows = action_probabilities(algo, episodes)
        stats["action_probs"] = rows
        for direction in "+-":
            mine = [r for r in rows if r["correct"] == direction]
            key = "up" if direction == "+" else "down"
            stats[f"p_plus_where_{key}"] = float(np.mean([r["p_plus"] for r in mine])) if mine else None
        stats["p_correct_mean"] = float(
            np.mean([r["p_plus"] if r["correct"] == "+" else r["p_minus"] for r in rows if r["correct"]])
        ) if rows else None
    return stats


def run(args: argparse.Namespace) -> None:
    import ray
    import torch

    from benchmarks.gpu_training import prepare_model

    if args.threads:
        torch.set_num_threads(args.threads)
    on_gpu = torch.cuda.is_available()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = (out / f"{args.tag}.jsonl").open("a")

    def write(name: str, kind: str, **fields: Any) -> None:
        log.write(json.dumps({"run": name, "kind": kind, **fields}, default=str) + "\n")
        log.flush()
        short = {k: v for k, v in fields.items() if k not in ("machine", "action_probs", "config")}
        print(name, kind, short, flush=True)

    load_s = prepare_model(args)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    ray.init(
        num_cpus=args.ray_cpus or os.cpu_count(),
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
        _temp_dir=f"/tmp/ray_{args.tag}" if args.separate_ray_dir else None,
    )
    algos: dict[str, Any] = {}
    for seed in args.seeds:
        for variant in args.variants:
            for algo_name in args.algos:
                name = run_name(variant, algo_name, seed, args.env)
                start = time.perf_counter()
                config = build_config(variant, algo_name, seed, args, on_gpu)
                algo = config.build_algo()
                algos[name] = algo
                param = next(algo.env_runner.module.parameters())
                learner_param = next(algo.learner_group._learner.module["default_policy"].parameters())
                write(
                    name,
                    "setup",
                    variant=variant,
                    algo=algo_name,
                    seed=seed,
                    env=args.env,
                    seconds=time.perf_counter() - start,
                    model_load_s=load_s,
                    machine=machine_info(),
                    env_runner_device=str(param.device),
                    env_runner_dtype=str(param.dtype),
                    learner_device=str(learner_param.device),
                    learner_dtype=str(learner_param.dtype),
                    decode_mode=algo.env_runner.backend.decode_mode(),
                    config={
                        k: getattr(config, k, None)
                        for k in (
                            "advantage_estimator", "advantage_norm", "lr", "kl_coeff", "entropy_coeff", "group_size",
                            "num_groups", "minibatch_size", "few_shot", "invalid_action_penalty", "gamma",
                            "step_advantage_weight", "num_epochs", "env_config", "llm_model", "sampling",
                        )
                    },
                )

    def do_eval(name: str, iteration: int) -> None:
        t = time.perf_counter()
        stats = evaluate(algos[name], args)
        write(name, "eval", iteration=iteration, seconds=time.perf_counter() - t, **stats)

    for name in algos:
        do_eval(name, 0)
    train_start = time.perf_counter()
    for iteration in range(1, args.iterations + 1):
        for name, algo in algos.items():
            t = time.perf_counter()
            result = algo.train()
            record = {key: _pick(result, *where) for key, where in RECORD_KEYS.items()}
            write(name, "iteration", iteration=iteration, seconds=time.perf_counter() - t, **record)
        out_of_time = time.perf_counter() - train_start > args.time_budget_s
        if iteration in args.eval_at or iteration == args.iterations or out_of_time:
            for name in algos:
                do_eval(name, iteration)
        if out_of_time:
            for name in algos:
                write(name, "stopped", reason=f"time budget {args.time_budget_s} s", iteration=iteration)
            break
    for name, algo in algos.items():
        if on_gpu:
            write(name, "memory", max_allocated_gib_process=torch.cuda.max_memory_allocated() / 2**30)
        algo.stop()


# ---------------------------------------------------------------- report


def read_runs(folder: Path) -> dict[str, list[dict]]:
    runs: dict[str, list[dict]] = {}
    for path in sorted(Path(folder).glob("*.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:  # a line cut off by a kill
                    continue
                runs.setdefault(record["run"], []).append(record)
    return runs


def _eval_at(records: list[dict], iteration: int) -> dict | None:
    return next((r for r in records if r["kind"] == "eval" and r["iteration"] == iteration), None)


def summarize_run(records: list[dict], eval_points: list[int], last_k: int = 3) -> dict[str, Any]:
    setup = next((r for r in records if r["kind"] == "setup"), {})
    iters = [r for r in records if r["kind"] == "iteration"]
    evals = [r for r in records if r["kind"] == "eval"]
    last = iters[-last_k:]
    final_eval = evals[-1] if evals else {}

    def mean_of(rows: list[dict], key: str) -> float | None:
        values = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
        return float(statistics.fmean(values)) if values else None

    row = {
        "variant": setup.get("variant"),
        "algo": setup.get("algo"),
        "seed": setup.get("seed"),
        "env": setup.get("env"),
        "iterations_done": iters[-1]["iteration"] if iters else 0,
        "valid_last": mean_of(last, "valid_action_rate"),
        "train_success_last": mean_of(last, "success_rate"),
        "entropy_end": iters[-1].get("entropy") if iters else None,
        "kl_end": iters[-1].get("kl") if iters else None,
        "s_per_iter_median": statistics.median([r["seconds"] for r in iters]) if iters else None,
        "final_eval_iteration": final_eval.get("iteration"),
        "p_plus_where_up": final_eval.get("p_plus_where_up"),
        "p_plus_where_down": final_eval.get("p_plus_where_down"),
        "p_correct_mean": final_eval.get("p_correct_mean"),
        "greedy_plus_rate": final_eval.get("greedy_plus_rate"),
    }
    for point in [0, *eval_points]:
        found = _eval_at(records, point)
        row[f"eval_{point}"] = found["success_rate"] if found else None
    return row


def _mean_std(values: list[float | None]) -> tuple[float | None, float | None, int]:
    values = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if not values:
        return None, None, 0
    return statistics.fmean(values), (statistics.pstdev(values) if len(values) > 1 else 0.0), len(values)


def _pm(values: list[float | None], fmt: str = ".3f") -> str:
    mean, std, n = _mean_std(values)
    if mean is None:
        return "-"
    return f"{mean:{fmt}}" if n == 1 else f"{mean:{fmt}} ± {std:{fmt}}"


def group_curves(runs: dict[str, list[dict]]) -> dict[str, dict[str, Any]]:
    """Per (variant, algo): mean and std over seeds of train success / valid rate per iteration and of the
    greedy eval success per evaluation point."""
    groups: dict[str, list[list[dict]]] = {}
    for records in runs.values():
        setup = next((r for r in records if r["kind"] == "setup"), None)
        if setup:
            groups.setdefault(f"{setup['variant']} {setup['algo']}", []).append(records)
    curves = {}
    for key, members in groups.items():
        curve: dict[str, Any] = {"seeds": len(members)}
        for metric in ("success_rate", "valid_action_rate", "entropy"):
            by_iter: dict[int, list[float]] = {}
            for records in members:
                for r in records:
                    if r["kind"] == "iteration" and isinstance(r.get(metric), (int, float)):
                        by_iter.setdefault(r["iteration"], []).append(r[metric])
            its = sorted(by_iter)
            curve[metric] = {
                "iteration": its,
                "mean": [statistics.fmean(by_iter[i]) for i in its],
                "std": [statistics.pstdev(by_iter[i]) for i in its],
                "n": [len(by_iter[i]) for i in its],
            }
        by_eval: dict[int, list[float]] = {}
        for records in members:
            for r in records:
                if r["kind"] == "eval":
                    by_eval.setdefault(r["iteration"], []).append(r["success_rate"])
        its = sorted(by_eval)
        curve["eval_success"] = {
            "iteration": its,
            "mean": [statistics.fmean(by_eval[i]) for i in its],
            "std": [statistics.pstdev(by_eval[i]) for i in its],
            "n": [len(by_eval[i]) for i in its],
        }
        curves[key] = curve
    return curves


def report(folder: Path, output_dir: Path, stem: str, note: str = "", plot: bool = False) -> list[Path]:
    runs = read_runs(folder)
    eval_points = sorted({r["iteration"] for recs in runs.values() for r in recs if r["kind"] == "eval"} - {0})
    rows = {name: summarize_run(records, eval_points) for name, records in runs.items()}
    curves = group_curves(runs)
    setup = next((r for recs in runs.values() for r in recs if r["kind"] == "setup"), {})
    machine = setup.get("machine", {})
    payload = {
        "benchmark": stem,
        "note": note,
        "machine": machine,
        "summary": rows,
        "curves": curves,
        "runs": runs,
    }
    output_dir.mkdir(parents=True, exist_ok=True)
    json_path, md_path = output_dir / f"{stem}.json", output_dir / f"{stem}.md"
    json_path.write_text(json.dumps(payload, indent=1, default=str) + "\n")
    lines = [f"# {stem} (generated by benchmarks/gpu_sweep.py)", ""]
    if note:
        lines += [note, ""]
    lines += [
        f"Machine: {machine.get('date')}, GPU {machine.get('gpu')}, {machine.get('cores')} cores, torch "
        f"{machine.get('torch')}, transformers {machine.get('transformers')}, ray {machine.get('ray')}; env runner "
        f"{setup.get('env_runner_device')} {setup.get('env_runner_dtype')} (decode {setup.get('decode_mode')}), "
        f"learner {setup.get('learner_device')} {setup.get('learner_dtype')}; model load "
        f"{_cell(setup.get('model_load_s'), '.1f')} s.",
        "",
        "Greedy eval success on held-out seeds (iteration 0 = before training); valid / train success = mean of the "
        "last 3 training iterations (sampled, T=1); entropy = the Learner's token entropy in the last iteration; "
        "P(+) = mean over evaluated start states of P(`<action>+</action>`) where the target is above (up) / below "
        "(down) the pointer, P(correct) = mean P of the right action, at the last evaluation.",
        "",
    ]
    eval_cols = [0, *eval_points]
    header = ["run", *[f"eval @{p}" for p in eval_cols], "valid (last 3)", "train succ (last 3)", "entropy end",
              "kl end", "P(+) up", "P(+) down", "P(correct)", "s/iter", "iters"]
    lines += ["| " + " | ".join(header) + " |", "|---" + "|---:" * (len(header) - 1) + "|"]
    for name, row in rows.items():
        cells = [name, *[_cell(row[f"eval_{p}"], ".3f") for p in eval_cols]]
        cells += [_cell(row["valid_last"], ".3f"), _cell(row["train_success_last"], ".3f"),
                  _cell(row["entropy_end"], ".3f"), _cell(row["kl_end"], ".4f"),
                  _cell(row["p_plus_where_up"], ".2f"), _cell(row["p_plus_where_down"], ".2f"),
                  _cell(row["p_correct_mean"], ".2f"), _cell(row["s_per_iter_median"], ".2f"),
                  str(row["iterations_done"])]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Mean ± std over seeds:", ""]
    header = ["variant algo", "seeds", *[f"eval @{p}" for p in eval_cols], "valid (last 3)", "entropy end",
              "P(+) up", "P(+) down", "P(correct)", "s/iter"]
    lines += ["| " + " | ".join(header) + " |", "|---" + "|---:" * (len(header) - 1) + "|"]
    grouped: dict[str, list[dict]] = {}
    for row in rows.values():
        grouped.setdefault(f"{row['variant']} {row['algo']}", []).append(row)
    for key, members in grouped.items():
        cells = [key, str(len(members))]
        cells += [_pm([m[f"eval_{p}"] for m in members]) for p in eval_cols]
        cells += [_pm([m[k] for m in members], ".2f" if k.startswith("p_") else ".3f")
                  for k in ("valid_last", "entropy_end", "p_plus_where_up", "p_plus_where_down", "p_correct_mean")]
        cells.append(_pm([m["s_per_iter_median"] for m in members], ".2f"))
        lines.append("| " + " | ".join(cells) + " |")
    extra = [r for recs in runs.values() for r in recs if r["kind"] in ("stopped", "error")]
    if extra:
        lines += ["", *[f"- {r['run']} {r['kind']}: {r.get('reason', '')} at iteration {r.get('iteration')}" for r in extra]]
    errors = sorted(Path(folder).glob("error*.txt"))
    for error in errors:
        lines += ["", f"## {error.name}", "", "```", error.read_text().strip()[-3000:], "```"]
    md_path.write_text("\n".join(lines) + "\n")
    paths = [json_path, md_path]
    if plot and curves:
        from benchmarks._common import save_plot

        def panel(metric: str, ylabel: str) -> dict[str, Any]:
            return {
                "xlabel": "iteration",
                "ylabel": ylabel,
                "lines": [
                    {"label": f"{key} (n={c['seeds']})", "x": c[metric]["iteration"], "y": c[metric]["mean"],
                     "spread": c[metric]["std"]}
                    for key, c in curves.items()
                    if c[metric]["iteration"]
                ],
            }

        paths.append(
            save_plot(
                output_dir / f"{stem}.png",
                [
                    panel("eval_success", "greedy eval success (held-out seeds)"),
                    panel("success_rate", "train success (sampled)"),
                    panel("valid_action_rate", "valid-action rate (train)"),
                ],
                title=f"{stem}: mean ± std over seeds",
            )
        )
    return paths


def best_variant(folder: Path, candidates: list[str] | None = None, prefer: str = "mean") -> str:
    """The variant with the highest mean final greedy eval success over seeds (ties: ``prefer``)."""
    runs = read_runs(folder)
    finals: dict[str, list[float]] = {}
    for records in runs.values():
        setup = next((r for r in records if r["kind"] == "setup"), None)
        evals = [r for r in records if r["kind"] == "eval"]
        if setup and evals and (candidates is None or setup["variant"] in candidates):
            finals.setdefault(setup["variant"], []).append(evals[-1]["success_rate"])
    if not finals:
        return prefer
    return max(finals, key=lambda v: (statistics.fmean(finals[v]), v == prefer))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, help="folder for the JSONL records")
    parser.add_argument("--tag", default="runs", help="this process's JSONL file name (OUT/<tag>.jsonl)")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), help=f"names of {list(VARIANTS)}, '+'-joined tokens (apply_variant), or 'best:DIR'")
    parser.add_argument("--algos", nargs="+", default=["gigpo"], choices=ALGOS)
    parser.add_argument("--env", default="NumberLine", choices=ENVS)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--iterations", type=int, default=16)
    parser.add_argument("--eval-at", type=int, nargs="*", default=[8, 16])
    parser.add_argument("--eval-seeds", type=int, default=64)
    parser.add_argument("--group-size", type=int, help="default: the tuned example's")
    parser.add_argument("--num-groups", type=int, help="default: the tuned example's")
    parser.add_argument("--minibatch-size", type=int, help="default: the tuned example's")
    parser.add_argument("--dtype", default="float32", help="the Learner's weights")
    parser.add_argument("--inference-dtype", default="float32", help="the EnvRunner's weights")
    parser.add_argument("--time-budget-s", type=float, default=1e9, help="training loop of this process")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    parser.add_argument("--ray-cpus", type=int, default=0)
    parser.add_argument("--separate-ray-dir", action="store_true", help="/tmp/ray_<tag> (several processes)")
    parser.add_argument("--report", type=Path, help="only write the report from this folder's JSONL files")
    parser.add_argument("--report-dir", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--report-stem", default="gpu_sweep")
    parser.add_argument("--plot", action="store_true", help="also <stem>.png (curves per variant and algo)")
    parser.add_argument("--note", default="")
    args = parser.parse_args(argv)
    if args.report:
        for path in report(args.report, args.report_dir, args.report_stem, args.note, args.plot):
            print("wrote", path)
        return 0
    if args.out is None:
        parser.error("--out is required")
    if len(args.variants) == 1 and args.variants[0].startswith("best:"):
        best = best_variant(Path(args.variants[0][5:]))
        # mean_g8's point (8 samples per start state) is what the GPU-size groups already have; the
        # few-shot examples of the 2shot variants are NumberLine's.
        mapped = {"mean_g8": "mean"}
        if args.env != "NumberLine":
            mapped.update({"mean_2shot": "mean", "mean_kl_2shot": "mean_kl"})
        args.variants = [mapped.get(best, best)]
        print(f"best sweep variant: {best}; running {args.variants[0]}", flush=True)
    for variant in args.variants:
        try:
            apply_variant(_probe_config(), variant)
        except ValueError as e:
            parser.error(str(e))
    try:
        run(args)
    except Exception:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / f"error_{args.tag}.txt").write_text(traceback.format_exc())
        raise
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

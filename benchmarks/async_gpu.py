"""Issue 25's bar: synchronous vs asynchronous rollouts, the main job at GPU size, side by side in one run.

    python benchmarks/async_gpu.py run --mode async --seed 0 --out DIR [--iterations 40]   # one run
    python benchmarks/async_gpu.py all --out DIR --seeds 0 1 2 [--modes sync async async2] [--detach]
    python benchmarks/async_gpu.py report DIR                                              # the report

A run is ``tuned_examples/numberline_gigpo.py`` as shipped at GPU size (``--num-groups`` x ``--group-size``;
``--env Sokoban``: the same recipe on text Sokoban, ``benchmarks/learning.py``'s ``sokoban``),
with one remote EnvRunner and the Learner in the driver, both on the GPU (half of it each in Ray's
accounting); ``--mode async`` only adds ``.training(async_rollouts=True)`` (max_staleness 1, broadcast every
update, the decoupled objective); ``--mode asyncK`` (e.g. ``async2``) also plays K updates' worth of groups per
rollout (``updates_per_rollout=K``, ``max_staleness=2K-1``). Every mode trains on the same number of groups per
iteration, so iteration ``i`` is equal samples. ``all`` starts one process per (mode, seed), all sharing the
GPU at once (``--pairs``: one seed's runs at a time, side by side), so every mode sees the same machine. Each iteration records its wall time and the success rate of the
episodes it trained on (sampled at temperature 1); the final policy is evaluated greedily on 64 held-out
seeds. The report (``benchmarks/results/async_h200.{json,md,png}``) gives, per mode and seed, the wall time
until the trained episodes' success (mean of the last 5 iterations) first reaches the synchronous runs'
final level, and the final greedy success at equal samples.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "benchmarks" / "results"
WINDOW = 5
#: RLlib's timer keys of one iteration (``result["timers"]``), as the report names them.
PHASES = {"env_runner_sampling_timer": "sample", "learner_update_timer": "update", "synch_weights": "sync"}
#: ``--backend vllm``: each engine (a run has the remote EnvRunner's, and the driver's local one, built only for
#: the final evaluation: generation/deferred.py) asks for a fixed 2 GiB KV cache instead of a share of the card
#: measured while it starts, so engines of runs starting together cannot starve each other (notes/vllm.md); the
#: carried vLLM has no flashinfer.
VLLM_OPTIONS = {"gpu_memory_utilization": 0.05,
                "engine_kwargs": {"attention_backend": "FLASH_ATTN", "max_model_len": 2048,
                                  "kv_cache_memory_bytes": 2 * 2**30}}


def updates_per_rollout(mode: str) -> int:
    """``async2`` -> 2; ``async`` -> 1."""
    return int(mode.removeprefix("async") or 1)


def build(args: argparse.Namespace, on_gpu: bool) -> Any:
    from rllib_llm.run.cli import load_tuned_example

    config, _ = load_tuned_example(ROOT / "tuned_examples" / "numberline_gigpo.py")
    config = config.copy(copy_frozen=False)
    if args.env != "NumberLine":
        from benchmarks.learning import ENVS

        config = ENVS[args.env](config)
    config.llm(model={**config.llm_model, "name_or_path": args.model, "dtype": args.dtype,
                      "inference_dtype": args.inference_dtype})
    # num_groups per EnvRunner: ``--runners`` runners play ``--num-groups`` groups per update between them.
    config.group_rollouts(num_groups=args.num_groups // args.runners, group_size=args.group_size)
    config.evaluation(evaluation_num_seeds=args.eval_seeds).debugging(seed=args.seed)
    if args.logprob_batch_size:
        config.training(logprob_batch_size=args.logprob_batch_size)
    if args.compile_learner:
        config.framework(torch_compile_learner=True)
    config.env_runners(num_env_runners=args.runners, num_cpus_per_env_runner=1)
    if on_gpu:
        config.learners(num_gpus_per_learner=0.5).env_runners(num_gpus_per_env_runner=0.5 / args.runners)
    if args.backend == "vllm":
        config.llm(model={**config.llm_model, "inference_dtype": "bfloat16"})
        config.generation(backend="vllm", backend_options=VLLM_OPTIONS)
    if args.mode.startswith("async"):
        k = updates_per_rollout(args.mode)
        config.training(async_rollouts=True, updates_per_rollout=k, max_staleness=max(args.max_staleness, 2 * k - 1),
                        broadcast_interval=1)
    config.validate()
    return config


def run(args: argparse.Namespace) -> None:
    import ray
    import torch

    from rllib_llm.core.models import load_causal_lm, load_tokenizer
    from rllib_llm.metrics import episode_success

    on_gpu = torch.cuda.is_available()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = f"{args.mode}_s{args.seed}"
    log = (out / f"{name}.jsonl").open("w")

    def write(kind: str, **fields: Any) -> None:
        log.write(json.dumps({"run": name, "kind": kind, **fields}, default=str) + "\n")
        log.flush()
        print(name, kind, fields, flush=True)

    load_causal_lm(args.model, load_tokenizer(args.model))  # the GGUF converted once, outside the timings
    ray.init(num_cpus=args.ray_cpus, num_gpus=1 if on_gpu else 0, include_dashboard=False, log_to_driver=False,
             configure_logging=False, _temp_dir=f"/tmp/ray_{name}")
    algo = build(args, on_gpu).build_algo()
    write("setup", mode=args.mode, seed=args.seed, device="cuda" if on_gpu else "cpu",
          gpu=torch.cuda.get_device_name(0) if on_gpu else None, num_groups=args.num_groups,
          group_size=args.group_size, runners=args.runners, backend=args.backend, dtype=args.dtype,
          inference_dtype=args.inference_dtype)
    start = time.perf_counter()
    iteration = 0
    while iteration < args.iterations and time.perf_counter() - start < args.time_budget_s:
        iteration += 1
        t = time.perf_counter()
        result = algo.train()
        episodes = algo.training_episodes
        write("iteration", iteration=iteration, seconds=time.perf_counter() - t, elapsed=time.perf_counter() - start,
              train_success=sum(map(episode_success, episodes)) / max(len(episodes), 1), episodes=len(episodes),
              sampled_success=result.get("env_runners", {}).get("success_rate"),
              timers={k: float(v) for k, v in (result.get("timers") or {}).items() if isinstance(v, (int, float))},
              **{k: float(v) for k, v in (result.get("async_rollouts") or {}).items()})
    algo.env_runner_group.sync_weights(from_worker_or_learner_group=algo.learner_group, inference_only=True)
    stats = algo.env_runner.sample(seeds=list(range(10_000_000, 10_000_000 + args.eval_seeds)), explore=False,
                                   group_size=1)
    write("eval", iteration=iteration, success=sum(map(episode_success, stats)) / len(stats))
    algo.stop()
    ray.shutdown()


def start_all(args: argparse.Namespace) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    common = (f"--out {out} --iterations {args.iterations} --model {args.model} --num-groups {args.num_groups} "
              f"--group-size {args.group_size} --eval-seeds {args.eval_seeds} --ray-cpus {args.ray_cpus} "
              f"--time-budget-s {args.time_budget_s} --runners {args.runners} --backend {args.backend} "
              f"--dtype {args.dtype} --env {args.env}" + (f" --inference-dtype {args.inference_dtype}" if args.inference_dtype else "")
              + (f" --logprob-batch-size {args.logprob_batch_size}" if args.logprob_batch_size else "")
              + (" --compile-learner" if args.compile_learner else ""))
    def cmd(mode: str, seed: int) -> str:
        return f"python3 {__file__} run --mode {mode} --seed {seed} {common} > {out}/log_{mode}_s{seed}.txt 2>&1 &\n"

    if args.pairs:  # one seed at a time: its runs side by side, one process per mode on the GPU
        body = "".join("".join(cmd(mode, seed) for mode in args.modes) + "wait\n" for seed in args.seeds)
    else:
        body = "".join(cmd(mode, seed) for seed in args.seeds for mode in args.modes) + "wait\n"
    if args.backend == "vllm":  # one short run first: vLLM compiles and caches its graphs once, not in every
        # timed run, and a broken engine shows in one log before the timed runs start
        warm = common.replace(f"--out {out}", f"--out {out}/warm").replace(
            f"--iterations {args.iterations}", "--iterations 1").replace(f"--eval-seeds {args.eval_seeds}", "--eval-seeds 2")
        # A warm-up that fails ends the script: every timed run would fail the same way, on device time.
        body = (f"python3 {__file__} run --mode sync --seed 99 {warm} > {out}/log_warm.txt 2>&1 "
                f"|| {{ touch {out}/warm_failed {out}/done; exit 1; }}\n") + body
    script = out / "runs.sh"
    script.write_text(body + f"touch {out}/done\n")
    process = subprocess.Popen(["bash", str(script)], cwd=ROOT, start_new_session=True, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if not args.detach:
        process.wait()


# --- report ------------------------------------------------------------------------------------------


def moving_mean(values: list[float], window: int = WINDOW) -> list[float]:
    return [sum(values[max(0, i + 1 - window) : i + 1]) / len(values[max(0, i + 1 - window) : i + 1])
            for i in range(len(values))]


def time_to(level: float, elapsed: list[float], curve: list[float]) -> float | None:
    """The wall time of the first iteration whose moving-mean success reaches ``level`` (None: never)."""
    return next((t for t, v in zip(elapsed, curve, strict=True) if v >= level - 1e-9), None)


def summarize(folder: Path) -> dict[str, Any]:
    runs: dict[str, dict[str, Any]] = {}
    for path in sorted(folder.glob("*.jsonl")):
        records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        its = [r for r in records if r["kind"] == "iteration"]
        setup = next((r for r in records if r["kind"] == "setup"), {})
        evals = [r for r in records if r["kind"] == "eval"]
        runs[path.stem] = {
            "mode": setup.get("mode"), "seed": setup.get("seed"), "gpu": setup.get("gpu"),
            "elapsed": [r["elapsed"] for r in its], "success": [r["train_success"] for r in its],
            "staleness_mean": [r.get("staleness_mean") for r in its], "groups_dropped": [r.get("groups_dropped") for r in its],
            "eval": evals[-1]["success"] if evals else None,
            "backend": setup.get("backend", "hf"),
            # Per iteration: waiting for / sampling groups, the Learner's update, the weight broadcast.
            "phase_s": {key: sum(r["timers"].get(key, 0.0) for r in its) / len(its)
                        for key in PHASES} if its else {},
        }
    sync = [r for r in runs.values() if r["mode"] == "sync" and r["success"]]
    level = min(moving_mean(r["success"])[-1] for r in sync) if sync else None
    for r in runs.values():
        curve = moving_mean(r["success"]) if r["success"] else []
        r["final_level"] = curve[-1] if curve else None
        r["time_to_level"] = time_to(level, r["elapsed"], curve) if level is not None and curve else None
        r["s_per_iter"] = r["elapsed"][-1] / len(r["elapsed"]) if r["elapsed"] else None
    # The sync runs' success over their first WINDOW iterations: a level no higher says they did not improve
    # (text Sokoban at this size), and "time to the level" then measures nothing.
    start = min(sum(r["success"][:WINDOW]) / len(r["success"][:WINDOW]) for r in sync) if sync else None
    summary: dict[str, Any] = {"level": level, "window": WINDOW, "sync_start": start,
                               "level_is_informative": level is not None and start is not None and level > start}
    for r in runs.values():  # equal samples: the last iteration every run of the seed reached
        reached = min(len(o["success"]) for o in runs.values() if o["seed"] == r["seed"])
        r["equal_samples_iteration"] = reached
        r["success_at_equal_samples"] = moving_mean(r["success"][:reached])[-1] if reached else None
    modes = sorted({r["mode"] for r in runs.values() if r["mode"]}, key=lambda m: (m != "sync", m))
    for mode in modes:
        mine = sorted((r for r in runs.values() if r["mode"] == mode), key=lambda r: r["seed"])
        summary[mode] = {
            "seeds": [r["seed"] for r in mine],
            "time_to_level_s": [r["time_to_level"] for r in mine],
            "eval": [r["eval"] for r in mine],
            "s_per_iter": [r["s_per_iter"] for r in mine],
            "success_at_equal_samples": [r["success_at_equal_samples"] for r in mine],
        }
    for mode in modes[1:] if "sync" in summary else []:
        summary[mode].update(speedups(summary["sync"], summary[mode]))
    if "async" in summary and "speedup_time_to_level" in summary["async"]:  # the key earlier reports had
        summary["speedup_time_to_level"] = summary["async"]["speedup_time_to_level"]
    return {"runs": runs, "summary": summary}


def speedups(sync: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """``other`` against ``sync``, seed by seed: time to the level (sync / other; None where either never got
    there) and iterations per second (sync s/iter / other s/iter); the time-to-level total (sum over seeds)
    only when every run of both reached the level."""
    by_seed = {seed: i for i, seed in enumerate(other["seeds"])}
    ratios, rates = [], []
    for i, seed in enumerate(sync["seeds"]):
        j = by_seed.get(seed)
        if j is None:
            continue
        s, o = sync["time_to_level_s"][i], other["time_to_level_s"][j]
        ratios.append(s / o if s is not None and o else None)
        s, o = sync["s_per_iter"][i], other["s_per_iter"][j]
        rates.append(s / o if s and o else None)
    out: dict[str, Any] = {"time_to_level_ratio_by_seed": ratios, "iterations_per_s_ratio_by_seed": rates}
    if ratios and all(r is not None for r in ratios) and len(ratios) == len(sync["seeds"]):
        out["speedup_time_to_level"] = sum(sync["time_to_level_s"]) / sum(
            other["time_to_level_s"][by_seed[seed]] for seed in sync["seeds"])
    return out


def fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def report(folder: Path, stem: str = "async_h200", results: Path = RESULTS) -> None:
    data = summarize(folder)
    data["benchmark"] = "async_gpu"
    data["note"] = (folder / "note.txt").read_text() if (folder / "note.txt").exists() else ""
    results.mkdir(parents=True, exist_ok=True)
    (results / f"{stem}.json").write_text(json.dumps(data, indent=2, default=str))
    s = data["summary"]
    lines = [f"# {stem} (generated by benchmarks/async_gpu.py)", "", data["note"], "",
             f"Level: the lowest final success of the synchronous runs (mean of the trained episodes' success over "
             f"the last {WINDOW} iterations): {s['level']}."
             + ("" if s.get("level_is_informative", True) else
                f" **The synchronous runs did not improve** (their first {WINDOW} iterations: {fmt(s.get('sync_start'), '.3f')}), "
                "so the time to this level measures nothing here: compare iterations/s and the success at equal samples."),
             "",
             "| run | gpu | backend | iterations | s/iter | sample / update / sync s | time to level (s) | final level | "
             "success at equal samples (iteration) | greedy eval (64 seeds) | staleness (mean) | groups dropped |",
             "|---|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
    for name, r in sorted(data["runs"].items()):
        stale = [v for v in r["staleness_mean"] if v is not None]
        dropped = [v for v in r["groups_dropped"] if v is not None]
        phases = " / ".join(fmt(r["phase_s"].get(key), ".2f") for key in PHASES)
        lines.append(f"| {name} | {r['gpu']} | {r['backend']} | {len(r['elapsed'])} | {fmt(r['s_per_iter'], '.2f')} | {phases} | "
                     f"{fmt(r['time_to_level'], '.0f')} | {fmt(r['final_level'], '.3f')} | "
                     f"{fmt(r.get('success_at_equal_samples'), '.3f')} ({r.get('equal_samples_iteration', '-')}) | {fmt(r['eval'], '.3f')} | "
                     f"{fmt(sum(stale) / len(stale) if stale else None, '.2f')} | {int(sum(dropped)) if dropped else '-'} |")
    for mode in [m for m in s if m.startswith("async")]:
        by_seed = ", ".join(fmt(v, ".2f") for v in s[mode]["time_to_level_ratio_by_seed"])
        rates = ", ".join(fmt(v, ".2f") for v in s[mode]["iterations_per_s_ratio_by_seed"])
        lines += ["", f"**{mode} vs sync**: time to the level, sum over seeds (sync / {mode}): "
                  f"{fmt(s[mode].get('speedup_time_to_level'), '.2f')}; per seed: {by_seed}; iterations/s per seed: {rates}."]
        if "success_at_equal_samples" in s[mode] and "sync" in s:
            mine = ", ".join(fmt(v, ".3f") for v in s[mode]["success_at_equal_samples"])
            theirs = ", ".join(fmt(v, ".3f") for v in s["sync"]["success_at_equal_samples"])
            lines.append(f"Trained success at equal samples (mean of {WINDOW} iterations up to the last one both runs of a "
                         f"seed reached), per seed: {mode} {mine}; sync {theirs}.")
    (results / f"{stem}.md").write_text("\n".join(lines) + "\n")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(8, 4.5))
        colors = {"sync": "tab:blue", "async": "tab:orange"}
        for name, r in sorted(data["runs"].items()):
            ax.plot(r["elapsed"], moving_mean(r["success"]), label=name, color=colors.get(r["mode"], "tab:green"),
                    alpha=0.8)
        if s["level"] is not None:
            ax.axhline(s["level"], color="gray", linestyle=":", label="level")
        ax.set_xlabel("wall time (s)")
        ax.set_ylabel(f"trained episodes' success (mean of {WINDOW} iterations)")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(results / f"{stem}.png", dpi=110)
    except ImportError:
        pass
    print((results / f"{stem}.md").read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=("run", "all", "report"))
    parser.add_argument("folder", nargs="?", help="report: the runs' folder")
    parser.add_argument("--out", default="/tmp/async_runs")
    parser.add_argument("--mode", default="sync", help="sync, async, or asyncK (K updates' worth of groups a rollout)")
    parser.add_argument("--modes", nargs="+", default=["sync", "async"], help="all: the modes to run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--iterations", type=int, default=40)
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--num-groups", type=int, default=8)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--eval-seeds", type=int, default=64)
    parser.add_argument("--max-staleness", type=int, default=1)
    parser.add_argument("--backend", choices=("hf", "vllm"), default="hf", help="the EnvRunners' generation backend")
    parser.add_argument("--dtype", default="float32", help="the Learner's weights (bfloat16: a faster update on a GPU)")
    parser.add_argument("--inference-dtype", default=None, help="the EnvRunner's weights (default: --dtype)")
    parser.add_argument("--logprob-batch-size", type=int, default=None,
                        help="rows per no-grad pass of the Learner connectors (default: the minibatch)")
    parser.add_argument("--env", choices=("NumberLine", "Sokoban"), default="NumberLine",
                        help="the main job's recipe on this env (Sokoban: benchmarks/learning.py's sokoban)")
    parser.add_argument("--compile-learner", action="store_true",
                        help="the Learner compiles its model (.framework(torch_compile_learner=True))")
    parser.add_argument("--ray-cpus", type=int, default=3)
    parser.add_argument("--runners", type=int, default=1, help="remote EnvRunners (num_groups is split among them)")
    parser.add_argument("--detach", action="store_true")
    parser.add_argument("--pairs", action="store_true", help="all: one seed's runs (every mode) at a time")
    parser.add_argument("--stem", default="async_h200")
    parser.add_argument("--results-dir", type=Path, default=RESULTS, help="report: where the files go")
    parser.add_argument("--time-budget-s", type=float, default=1e9, help="run: stop training after this long")
    args = parser.parse_args(argv)
    for mode in [args.mode, *args.modes]:
        if not re.fullmatch(r"sync|async[1-9]?", mode):
            parser.error(f"mode {mode!r}: sync, async or asyncK (K in 1-9)")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if args.step == "run":
        run(args)
    elif args.step == "all":
        start_all(args)
    else:
        report(Path(args.folder or args.out), args.stem, args.results_dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

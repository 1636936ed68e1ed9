"""Where a Learner update of the main job at GPU size goes: one batch, timed update by update, per setting.

    python benchmarks/learner_update.py --out DIR [--model smollm2-135m-instruct] [--repeats 3]

Issue 25's timers showed the Learner, not generation, bounds a lock-step iteration at GPU size on one GPU
(notes/async.md, 2026-12-07): ~3.5 s an update for ~190 rows of a 135M model. This plays one batch of the
main job (``tuned_examples/numberline_gigpo.py``, ``--num-groups`` x ``--group-size``, built as
benchmarks/async_gpu.py builds a ``sync`` run: one remote EnvRunner, the Learner in this process), then
updates on that same batch again and again (the weights move; the work per update does not), timing each
LearnerGroup update (connector pipeline + minibatch passes + optimizer steps: what RLlib's
``learner_update_timer`` times), one weight sync and one sampling, per setting:

- ``shipped``: the config as shipped, on this device (on a GPU: no prompt-prefix split, the gradient step's
  clipping and nan/inf check over all gradients at once, no-grad passes of the minibatch's 32 rows);
- ``rllib_steps``: that with RLlib's own TorchLearner gradient step (clipping and a nan/inf check tensor by
  tensor: ~4 kernels and 2 device syncs per tensor; this process puts its methods back on the Learner);
- ``split_prefix``: ``shipped`` with the rows' shared prompt prefix run once at batch 1
  (``shared_prefix_forward=True``: fewer FLOPs, two model calls a pass instead of one);
- ``logprob_all``: ``shipped`` with ``logprob_batch_size`` = the whole batch (one no-grad reference pass an update);
- ``cublas``: ``logprob_all`` with ``torch.backends.cuda.preferred_blas_library("cublas")`` (the 2026-12-07
  profile put ~110 us of host time on each ``aten::mm``, several times a plain launch: cuBLASLt's per-call
  heuristics are one suspect);
- ``tf32``: ``logprob_all`` plus TF32 matmuls (``torch.backends.cuda.matmul.allow_tf32``);
- ``minibatch_64`` / ``minibatch_all``: ``logprob_all`` with fewer, larger minibatches (fewer optimizer steps:
  a different update, listed to size the per-minibatch cost, not offered as the same algorithm);
- ``bf16``: a second build with ``--dtype bfloat16`` (the frozen base in bf16, adapters float32), as
  ``logprob_all``;
- ``compile``: a build with ``.framework(torch_compile_learner=True)`` (RLlib's flag; ``LLMRLModule.compile``
  compiles the language model with dynamic shapes, inductor), as ``shipped``; its warm-up update, which
  compiles, is recorded as ``compile_first_s``.

(The first run, 2026-12-07, ``learner_update_h200.md``, was of the tree before ``shared_prefix_forward`` and the
foreach gradient step: its ``shipped`` split the prefix and took RLlib's step.)

A torch.profiler table of one ``shipped`` update (top operators by self CPU and by CUDA time) goes to
``DIR/profile.txt``. Writes ``DIR/learner_update.json`` and prints a table. Each setting's first update is a
warm-up, not timed. ``--settings`` picks a subset (a tree without ``logprob_batch_size`` runs ``shipped`` only).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import device_timed, load_average  # noqa: E402

SETTINGS = ("shipped", "rllib_steps", "split_prefix", "logprob_all", "cublas", "tf32", "minibatch_64", "minibatch_all",
            "bf16", "compile")
#: Settings that need a build of their own (the others change the built Learner in place).
OWN_BUILD = ("bf16", "compile")
#: Each float32 setting: minibatch size, no-grad pass rows ("all": the whole batch, None: as configured),
#: shared_prefix_forward, TF32, RLlib's gradient step.
PLAN = {
    "shipped": (32, None, None, False, False),
    "rllib_steps": (32, None, None, False, True),
    "split_prefix": (32, None, True, False, False),
    "logprob_all": (32, "all", None, False, False),
    "cublas": (32, "all", None, False, False),
    "tf32": (32, "all", None, True, False),
    "minibatch_64": (64, "all", None, True, False),
    "minibatch_all": (None, "all", None, True, False),
}


def build(args: argparse.Namespace, dtype: str, compile_learner: bool = False) -> Any:
    import torch

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from async_gpu import build as build_run

    run_args = argparse.Namespace(
        model=args.model, dtype=dtype, inference_dtype=None, num_groups=args.num_groups, group_size=args.group_size,
        runners=1, eval_seeds=2, seed=0, backend="hf", mode="sync", max_staleness=1, logprob_batch_size=None,
        compile_learner=compile_learner, env="NumberLine",
    )
    return build_run(run_args, torch.cuda.is_available()).build_algo()


def set_logprob_rows(algo: Any, rows: int | None) -> None:
    """The Learner connectors' no-grad pass size, changed in place on the built pipeline."""
    for piece in algo.learner_group._learner._learner_connector.connectors:
        if hasattr(piece, "rows"):
            piece.rows = rows


def update(algo: Any, episodes: list, minibatch_size: int | None) -> None:
    """One LearnerGroup update on ``episodes`` as ``LLMAlgorithm._update`` makes it (what RLlib's
    ``learner_update_timer`` times), with ``minibatch_size`` (None: the whole batch)."""
    from rllib_llm.algorithms.sharding import learner_update_data

    algo.learner_group.update(**learner_update_data(episodes, 0, minibatch_size, 1), num_epochs=1,
                              minibatch_size=minibatch_size, shuffle_batch_per_epoch=True)


def use_rllib_steps(learner: Any, on: bool) -> None:
    """Puts RLlib's TorchLearner gradient step (per-tensor clipping and nan/inf checks) back on ``learner``
    (``on``), or the Learner's own. A Learner without its own step (a tree before 2026-12-07) is left as it is."""
    import functools

    from ray.rllib.core.learner.torch.torch_learner import TorchLearner

    if type(learner).apply_gradients is TorchLearner.apply_gradients:
        return

    for name in ("postprocess_gradients_for_module", "apply_gradients"):
        if on:
            setattr(learner, name, functools.partial(getattr(TorchLearner, name), learner))
        else:
            learner.__dict__.pop(name, None)
    learner.config._is_frozen = False
    learner.config.torch_skip_nan_gradients = not on
    learner.config._is_frozen = True


def measure(algo: Any, episodes: list, repeats: int, minibatch_size: int | None) -> list[float]:
    """``repeats`` timed updates after one warm-up."""
    update(algo, episodes, minibatch_size)
    return [device_timed(lambda: update(algo, episodes, minibatch_size)) for _ in range(repeats)]


def profile(algo: Any, episodes: list, out: Path) -> None:
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with torch_profile(activities=activities) as prof:
        update(algo, episodes, 32)
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25)
    if torch.cuda.is_available():
        table += "\n\n" + prof.key_averages().table(sort_by="cuda_time_total", row_limit=25)
    (out / "profile.txt").write_text(table)


def report(after: Path, before: Path | None, results: Path, stem: str) -> None:
    """``learner_update.json`` of this tree (and of the tree before ReferenceLogProbs, ``before``: its
    ``shipped`` setting computed the reference log-probs inside the loss, once per minibatch) as
    ``results/<stem>.{json,md}``: median seconds per update and the ratio to ``shipped`` (and to before)."""
    data = json.loads(after.read_text())
    if before is not None:
        data["before_reference_column"] = json.loads(before.read_text())
    medians = {name: statistics.median(times) for name, times in data["settings"].items()}
    old = data.get("before_reference_column", {}).get("settings", {}).get("shipped")
    base = statistics.median(old) if old else medians.get("shipped")
    lines = [f"# One Learner update of the main job, {data['num_groups']} groups x {data['group_size']} ({data['date']}, "
             f"{data['device']})", "",
             f"`python benchmarks/learner_update.py` : {data['model']}, "
             f"{data['num_groups']} groups x {data['group_size']} = {data.get('rows')} rows, the same batch updated on "
             f"again and again; median of the timed updates (first one a warm-up). Sampling that batch took "
             f"{data.get('sample_s', 0):.2f} s, one weight sync {data.get('sync_s', 0):.3f} s"
             + (f" (bf16 build: {data['bf16_sync_s']:.3f} s)." if "bf16_sync_s" in data else ".")
             + (f" The compiled build's first update (compiling) took {data['compile_first_s']:.1f} s."
                if "compile_first_s" in data else "")
             + (f" Load average (1, 5, 15 min) before / after: {data['load_avg_before']} / {data.get('load_avg_after')}."
                if "load_avg_before" in data else ""), "",
             "| setting | s / update | updates | vs " + ("before" if old else "shipped") + " |", "|---|---:|---|---:|"]
    if old:
        lines.append(f"| before (reference pass per minibatch, in the loss) | {base:.3f} | "
                     f"{', '.join(f'{t:.3f}' for t in old)} | 1.00x |")
    for name, median in medians.items():
        times = ", ".join(f"{t:.3f}" for t in data["settings"][name])
        lines.append(f"| {name} | {median:.3f} | {times} | {base / median:.2f}x |")
    results.mkdir(parents=True, exist_ok=True)
    (results / f"{stem}.json").write_text(json.dumps(data, indent=2))
    (results / f"{stem}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("/tmp/learner_update"))
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--num-groups", type=int, default=8)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=SETTINGS)
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--report", type=Path, help="report this learner_update.json (to --results-dir) and stop")
    parser.add_argument("--before", type=Path, help="report: the tree before's learner_update.json")
    parser.add_argument("--results-dir", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--stem", default="learner_update_h200")
    args = parser.parse_args(argv)
    if args.report:
        return report(args.report, args.before, args.results_dir, args.stem)
    args.out.mkdir(parents=True, exist_ok=True)

    import ray
    import torch
    from ray.rllib.core import DEFAULT_MODULE_ID

    from rllib_llm.core.models import load_causal_lm, load_tokenizer

    load_causal_lm(args.model, load_tokenizer(args.model))  # the GGUF converted once, outside the timings
    own_ray = not ray.is_initialized()
    if own_ray:
        ray.init(num_cpus=4, num_gpus=1 if torch.cuda.is_available() else 0, include_dashboard=False,
                 log_to_driver=False, configure_logging=False)
    results: dict[str, Any] = {
        "model": args.model, "num_groups": args.num_groups, "group_size": args.group_size,
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
        "torch": torch.__version__, "date": time.strftime("%Y-%m-%d"), "load_avg_before": load_average(), "settings": {},
    }
    record = results["settings"]
    float_settings = [s for s in args.settings if s not in OWN_BUILD]
    if float_settings:
        algo = build(args, "float32")
        episodes = algo.sample_episodes()
        rows = sum(len(e) for e in episodes)
        results["rows"] = rows
        results["sample_s"] = device_timed(algo.sample_episodes)
        results["sync_s"] = device_timed(algo._broadcast_weights)
        learner = algo.learner_group._learner
        module = learner.module[DEFAULT_MODULE_ID].unwrapped()
        blas = torch.backends.cuda.preferred_blas_library() if torch.cuda.is_available() else None
        configured_rows = next((p.rows for p in learner._learner_connector.connectors if hasattr(p, "rows")), None)
        for name in float_settings:
            minibatch, logprob_rows, split, tf32, rllib_steps = PLAN[name]
            set_logprob_rows(algo, rows if logprob_rows == "all" else configured_rows)
            module.shared_prefix_forward = split
            torch.backends.cuda.matmul.allow_tf32 = tf32
            use_rllib_steps(learner, rllib_steps)
            if torch.cuda.is_available():
                torch.backends.cuda.preferred_blas_library("cublas" if name == "cublas" else blas)
            record[name] = measure(algo, episodes, args.repeats, minibatch)
            print(name, [f"{t:.3f}" for t in record[name]], flush=True)
            if name == "shipped" and not args.no_profile:
                profile(algo, episodes, args.out)
        use_rllib_steps(learner, False)
        torch.backends.cuda.matmul.allow_tf32 = False
        algo.stop()
    if "bf16" in args.settings:
        algo = build(args, "bfloat16")
        episodes = algo.sample_episodes()
        set_logprob_rows(algo, sum(len(e) for e in episodes))
        results["bf16_sync_s"] = device_timed(algo._broadcast_weights)
        record["bf16"] = measure(algo, episodes, args.repeats, 32)
        print("bf16", [f"{t:.3f}" for t in record["bf16"]], flush=True)
        algo.stop()
    if "compile" in args.settings:
        algo = build(args, "float32", compile_learner=True)
        episodes = algo.sample_episodes()
        results["compile_first_s"] = device_timed(lambda: update(algo, episodes, 32))
        record["compile"] = measure(algo, episodes, args.repeats, 32)
        print("compile", [f"{t:.3f}" for t in record["compile"]], f"(first update {results['compile_first_s']:.1f} s)",
              flush=True)
        algo.stop()
    if own_ray:
        ray.shutdown()
    results["load_avg_after"] = load_average()
    (args.out / "learner_update.json").write_text(json.dumps(results, indent=2))
    base = statistics.median(record["shipped"]) if "shipped" in record else None
    print(f"\n{results['device']}, {results.get('rows')} rows, sample {results.get('sample_s', 0):.2f} s, "
          f"sync {results.get('sync_s', 0):.3f} s")
    print(f"{'setting':<15} {'median s':>9} {'vs shipped':>11}")
    for name, times in record.items():
        median = statistics.median(times)
        print(f"{name:<15} {median:>9.3f} {base / median if base else float('nan'):>10.2f}x")


if __name__ == "__main__":
    main()

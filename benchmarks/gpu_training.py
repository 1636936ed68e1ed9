"""GiGPO vs GRPO on NumberLine with the embedded SmolLM2-135M-Instruct on one GPU: success curves.

Both algorithms start from ``tuned_examples/numberline_gigpo.py`` (the CPU main job: same prompt,
few-shot example, stop string, learning rate, LoRA adapters) and differ only in the advantage
estimator; the groups are larger than on a CPU. Both train in one process and one Ray, an iteration of
each in turn, so a time-budget stop leaves them equally far. Precision: the
Learner keeps float32 weights (bf16 weights would round away most Adam steps at lr 5e-5), the EnvRunner
generates in ``--inference-dtype`` (bf16) with the ``hf`` backend (CUDA graphs on a GPU).

Every iteration appends one JSON line to ``OUT/<algo>.jsonl`` at once, so a run cut short still leaves
its curve; ``--report DIR`` turns those files into ``gpu_training.json`` + ``gpu_training.md``.

GPU:  ``python benchmarks/gpu_training.py --out $OUT``
CPU dry run (tiny model, seconds): ``python benchmarks/gpu_training.py --out /tmp/g --model tiny-random-llama
--iterations 1 --group-size 2 --num-groups 2 --eval-seeds 2 --eval-every 1``
"""

from __future__ import annotations

import argparse
import json
import numbers
import sys
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import _cell, machine_info  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TUNED_EXAMPLE = ROOT / "tuned_examples" / "numberline_gigpo.py"
ALGOS = ("gigpo", "grpo")
ITERATION_KEYS = {  # record key -> (result section, key)
    "success_rate": ("env_runners", "success_rate"),
    "valid_action_rate": ("env_runners", "valid_action_rate"),
    "episode_return_mean": ("env_runners", "episode_return_mean"),
    "response_length_mean": ("env_runners", "response_length_mean"),
    "generated_tokens_per_s": ("env_runners", "generated_tokens_per_s"),
    "num_env_steps": ("env_runners", "num_env_steps_sampled"),
    "policy_loss": ("learners", "policy_loss"),
    "entropy": ("learners", "entropy"),
    "clip_fraction": ("learners", "clip_fraction"),
}


def build_config(algo: str, args: argparse.Namespace, on_gpu: bool):
    """The tuned example's config with this run's model, precision, group sizes and estimator."""
    from rllib_llm.algorithms.grpo import GRPO
    from rllib_llm.run.cli import load_tuned_example

    config, _ = load_tuned_example(TUNED_EXAMPLE)
    config = config.copy(copy_frozen=False)
    if algo == "grpo":
        config.algo_class, config.advantage_estimator = GRPO, "grpo"
    model = {
        **config.llm_model,
        "name_or_path": args.model,
        "dtype": args.dtype,
        "inference_dtype": args.inference_dtype,
    }
    config.llm(model=model).group_rollouts(group_size=args.group_size, num_groups=args.num_groups)
    config.training(minibatch_size=args.minibatch_size).evaluation(evaluation_num_seeds=args.eval_seeds)
    config.debugging(seed=args.seed)
    if on_gpu:
        config.learners(num_gpus_per_learner=1).env_runners(num_gpus_per_env_runner=1)
    return config


def _pick(result: dict, section: str, key: str) -> Any:
    values = result.get(section, {})
    if section == "learners":
        values = values.get("default_policy", {})
    value = values.get(key)
    return float(value) if isinstance(value, numbers.Real) else value  # numpy scalars too


def run(args: argparse.Namespace) -> None:
    """Trains every algorithm of ``--algos`` in this process, one iteration of each in turn (so a time budget
    cut leaves them equally far), writing one JSON line per iteration/evaluation to ``OUT/<algo>.jsonl``."""
    import torch

    from benchmarks._common import init_ray

    on_gpu = torch.cuda.is_available()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    logs = {algo: (out / f"{algo}.jsonl").open("a") for algo in args.algos}

    def write(algo: str, kind: str, **fields: Any) -> None:
        logs[algo].write(json.dumps({"algo": algo, "kind": kind, **fields}, default=str) + "\n")
        logs[algo].flush()
        print(algo, kind, {k: v for k, v in fields.items() if k != "machine"}, flush=True)

    (out / "prepare.json").write_text(json.dumps({"model_load_s": prepare_model(args)}))
    init_ray()
    algos = {}
    for name in args.algos:
        start = time.perf_counter()
        algos[name] = build_config(name, args, on_gpu).build_algo()
        param = next(algos[name].env_runner.module.parameters())
        write(
            name,
            "setup",
            seconds=time.perf_counter() - start,
            machine=machine_info(),
            env_runner_device=str(param.device),
            env_runner_dtype=str(param.dtype),
            learner_dtype=str(next(algos[name].learner_group._learner.module["default_policy"].parameters()).dtype),
            decode_mode=algos[name].env_runner.backend.decode_mode(),
        )

    def evaluate(name: str, iteration: int) -> None:
        t = time.perf_counter()
        stats = algos[name].evaluate_seeds()
        write(name, "eval", iteration=iteration, seconds=time.perf_counter() - t, **stats)

    for name in algos:
        evaluate(name, 0)
    train_start = time.perf_counter()
    for iteration in range(1, args.iterations + 1):
        out_of_time = False
        for name, algo in algos.items():
            t = time.perf_counter()
            result = algo.train()
            record = {key: _pick(result, *where) for key, where in ITERATION_KEYS.items()}
            write(name, "iteration", iteration=iteration, seconds=time.perf_counter() - t, **record)
        out_of_time = time.perf_counter() - train_start > args.time_budget_s
        for name in algos:
            if iteration % args.eval_every == 0 or iteration == args.iterations or out_of_time:
                evaluate(name, iteration)
            if out_of_time:
                write(name, "stopped", reason=f"time budget {args.time_budget_s} s", iteration=iteration)
        if out_of_time:
            break
    for name, algo in algos.items():
        if on_gpu:
            write(name, "memory", max_allocated_gib_all_algos=torch.cuda.max_memory_allocated() / 2**30)
        algo.stop()
    report(out, out)


def prepare_model(args: argparse.Namespace) -> float:
    """Loads the model once up front (the first load of the embedded model converts its GGUF file and
    caches the result) and returns the seconds it took, so setup times below exclude the conversion."""
    from rllib_llm.core.models import load_causal_lm, load_tokenizer

    start = time.perf_counter()
    load_causal_lm(args.model, load_tokenizer(args.model))
    return time.perf_counter() - start


def _read_records(folder: Path) -> dict[str, list[dict]]:
    return {
        path.stem: [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        for path in sorted(folder.glob("*.jsonl"))
    }


def report(folder: Path, output_dir: Path, stem: str = "gpu_training", note: str = "") -> tuple[Path, Path]:
    """``<stem>.json`` (all records, per algorithm) and ``<stem>.md`` (curves as tables) from the JSONL files."""
    runs = _read_records(Path(folder))
    prepare = Path(folder) / "prepare.json"
    payload = {
        "benchmark": "gpu_training",
        "note": note,
        "prepare": json.loads(prepare.read_text()) if prepare.exists() else {},
        "runs": runs,
    }
    output_dir.mkdir(parents=True, exist_ok=True)
    json_path, md_path = output_dir / f"{stem}.json", output_dir / f"{stem}.md"
    json_path.write_text(json.dumps(payload, indent=2, default=str) + "\n")
    lines = ["# GiGPO vs GRPO on NumberLine, one GPU (generated by benchmarks/gpu_training.py)", ""]
    lines += [" ".join(__doc__.split("\n\n")[1].split()), ""]
    if note:
        lines += [f"**Note:** {note}", ""]
    if payload["prepare"]:
        lines += [
            f"Model load before training (GGUF conversion included): {payload['prepare']['model_load_s']:.1f} s.",
            "",
        ]
    for algo, records in runs.items():
        setup = next((r for r in records if r["kind"] == "setup"), {})
        machine = setup.get("machine", {})
        lines += [
            f"## {algo}",
            "",
            f"date {machine.get('date')}, GPU {machine.get('gpu')}, torch {machine.get('torch')}, "
            f"transformers {machine.get('transformers')}, ray {machine.get('ray')}; env runner on "
            f"{setup.get('env_runner_device')} {setup.get('env_runner_dtype')}, decode mode "
            f"{setup.get('decode_mode')}, setup {_cell(setup.get('seconds'), '.1f')} s",
            "",
        ]
        lines += [
            "| iteration | train success | valid actions | return | tokens/s | s/iter |",
            "|---:|---:|---:|---:|---:|---:|",
        ]
        for r in records:
            if r["kind"] == "iteration":
                cells = [
                    (r["iteration"], None),
                    (r["success_rate"], ".3f"),
                    (r["valid_action_rate"], ".3f"),
                    (r["episode_return_mean"], ".3f"),
                    (r["generated_tokens_per_s"], ".0f"),
                    (r["seconds"], ".2f"),
                ]
                lines.append("| " + " | ".join(_cell(v, f) for v, f in cells) + " |")
        lines += ["", "| after iteration | greedy eval success | valid actions | episodes |", "|---:|---:|---:|---:|"]
        lines += [
            f"| {r['iteration']} | {_cell(r.get('success_rate'), '.3f')} | {_cell(r.get('valid_action_rate'), '.3f')}"
            f" | {r.get('num_episodes')} |"
            for r in records
            if r["kind"] == "eval"
        ]
        lines += [
            f"- {r['kind']}: { ({k: v for k, v in r.items() if k not in ('algo', 'kind')}) }"
            for r in records
            if r["kind"] in ("stopped", "memory", "error")
        ]
        lines.append("")
    error = Path(folder) / "error.txt"
    if error.exists():
        lines += ["## Error", "", "```", error.read_text().strip(), "```", ""]
    md_path.write_text("\n".join(lines))
    return json_path, md_path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, help="folder for the JSONL curves, logs and the report")
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--algos", nargs="+", default=list(ALGOS), choices=ALGOS)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--time-budget-s", type=float, default=420.0, help="training loop, all algorithms")
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--num-groups", type=int, default=8)
    parser.add_argument("--minibatch-size", type=int, default=64)
    parser.add_argument("--eval-seeds", type=int, default=64)
    parser.add_argument("--eval-every", type=int, default=5)
    parser.add_argument("--dtype", default="float32", help="the Learner's weights")
    parser.add_argument("--inference-dtype", default="bfloat16", help="the EnvRunner's (generation) weights")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--report", type=Path, help="only write the report from this folder's JSONL files")
    parser.add_argument("--report-dir", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--report-stem", default="gpu_training")
    parser.add_argument("--note", default="", help="a sentence the report carries (e.g. what was wrong in a run)")
    args = parser.parse_args(argv)
    if args.report:
        for path in report(args.report, args.report_dir, args.report_stem, args.note):
            print("wrote", path)
        return 0
    if args.out is None:
        parser.error("--out is required")
    try:
        run(args)
    except Exception:
        (Path(args.out) / "error.txt").write_text(traceback.format_exc())
        report(args.out, args.out)
        raise
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

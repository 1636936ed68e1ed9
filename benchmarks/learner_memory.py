"""Peak GPU memory and time of one Learner update at real-model size, per Learner setting, side by side.

    python benchmarks/learner_memory.py --model /models/qwen05.gguf [--settings before after ...] [--out DIR]

Issue 43 measured GiGPO on text Sokoban with Qwen2.5-Coder-0.5B-Instruct at ``--gpu`` size (8 groups x 4
episodes, 32-row minibatches): 74 GB of the 80 GB card and 5.9 s per Learner update. This builds that run
(``tuned_examples/sokoban_gigpo.py --gpu --model MODEL``: the prefilled ``<action>`` replies of the CPU recipe)
once per setting, samples one batch (the run's seed, so every setting trains on the same kind of batch), then
times ``--repeats`` LearnerGroup updates on it after a warm-up, with the card's peak allocated memory over
those updates (the sampler's copy of the model included: it shares the process and the card). Settings:

- ``before``: the tree before issue 43's Learner work: float32 weights, the LM head over the whole minibatch
  in one pass (full-vocabulary float32 logits, their log-softmax and its exp kept for backward), the
  foreach AdamW, no micro-batches;
- ``chunked``: ``before`` with the head in checkpointed chunks (``token_forward.logprobs_from_hidden``);
- ``bf16``: ``chunked`` with the frozen base in bfloat16 (LoRA adapters stay float32) and the fused AdamW;
- ``after``: ``bf16`` in micro-batches of 8 rows (what ``tuned_examples/sokoban_gigpo_qwen.py`` ships);
- ``bf16_micro16``: ``bf16`` in micro-batches of 16 rows;
- ``checkpointed``: ``bf16`` with activation checkpointing (``.llm(gradient_checkpointing=True)``: each
  decoder layer's activations recomputed in backward) instead of micro-batches;
- ``think``: ``checkpointed`` on the real-model recipe itself (``tuned_examples/sokoban_gigpo_qwen.py``: replies
  reasoned in ``<think>`` up to 256 tokens, 64-row minibatches), and ``think_micro16`` with micro-batches of
  16 rows as well (rows of ~1,300 tokens: one layer's recomputed activations are GBs at 64 rows).

Also recorded per setting: the PPO ratio the first update sees, exp(learner log-prob - sampler log-prob)
over the batch's response tokens before any step (its std says how well the Learner's pass reproduces the
sampler's: bf16 base weights on both sides against float32 on both). Writes ``DIR/learner_memory.json`` and
``benchmarks/results/learner_memory_<stem>.{json,md}``, and prints the table.
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

SETTINGS = ("before", "chunked", "bf16", "after", "bf16_micro16", "checkpointed", "think", "think_micro16")
#: Each setting: (tuned example, dtype, chunked head, micro_batch_size or "example", fused AdamW).
PLAN: dict[str, tuple[str, str, bool, Any, bool]] = {
    "before": ("sokoban_gigpo.py", "float32", False, None, False),
    "chunked": ("sokoban_gigpo.py", "float32", True, None, False),
    "bf16": ("sokoban_gigpo.py", "bfloat16", True, None, True),
    "after": ("sokoban_gigpo.py", "bfloat16", True, 8, True),
    "bf16_micro16": ("sokoban_gigpo.py", "bfloat16", True, 16, True),
    "checkpointed": ("sokoban_gigpo.py", "bfloat16", True, None, True),
    "think": ("sokoban_gigpo_qwen.py", "bfloat16", True, "example", True),
    "think_micro16": ("sokoban_gigpo_qwen.py", "bfloat16", True, 16, True),
}
#: Settings with activation checkpointing.
CHECKPOINTED = {"checkpointed", "think", "think_micro16"}


def use_tree_before(chunked: bool, fused: bool) -> None:
    """Puts the one-pass LM head and the unfused AdamW of the tree before back (``chunked``/``fused`` False)
    or this tree's (True): the two functions the Learner asks, replaced where they are looked up."""
    import rllib_llm.algorithms.learner as learner
    import rllib_llm.core.rl_module as rl_module
    import rllib_llm.token_forward as token_forward

    original = getattr(use_tree_before, "original", None)
    if original is None:
        original = use_tree_before.original = (token_forward.chunked_head, learner.fused_adamw)
    head = original[0] if chunked else (lambda model: None)
    token_forward.chunked_head = rl_module.chunked_head = head
    learner.fused_adamw = original[1] if fused else (lambda params: False)


def build(args: argparse.Namespace, setting: str) -> Any:
    from rllib_llm.run.cli import at_gpu_size, load_tuned_example, with_model

    example, dtype, chunked, micro, fused = PLAN[setting]
    use_tree_before(chunked, fused)
    config, _ = load_tuned_example(ROOT / "tuned_examples" / example)
    config = with_model(config.copy(copy_frozen=False), args.model)
    config.llm(model={**config.llm_model, "dtype": dtype})
    if not args.dry_run:
        at_gpu_size(config)
    else:
        config.group_rollouts(num_groups=1, group_size=2, max_episode_steps=2).generation(max_new_tokens=8)
    config.training(micro_batch_size=config.micro_batch_size if micro == "example" else micro)
    config.llm(gradient_checkpointing=setting in CHECKPOINTED)
    config.evaluation(evaluation_num_seeds=2).debugging(seed=args.seed)
    return config.build_algo()


def ratio_stats(algo: Any, episodes: list) -> dict[str, float]:
    """exp(learner - sampler log-prob) over every response token of ``episodes``, before any update."""
    import torch
    from ray.rllib.core import DEFAULT_MODULE_ID

    from rllib_llm.algorithms.learner_connectors import pad_token_batch, step_columns
    from rllib_llm.columns import ACTION_LOGP, PROMPT, RESPONSE

    module = algo.learner_group._learner.module[DEFAULT_MODULE_ID].unwrapped()
    columns = step_columns(episodes)
    device = next(module.parameters()).device
    ratios = []
    with torch.no_grad():
        for start in range(0, len(columns[PROMPT]), 16):
            part = {k: columns[k][start : start + 16] for k in (PROMPT, RESPONSE, ACTION_LOGP)}
            batch = {k: torch.as_tensor(v, device=device) for k, v in pad_token_batch(part, module.tokenizer.pad_token_id).items()}
            logp, _ = module.logprobs(batch)
            mask = batch["response_mask"].bool()
            ratios.append(torch.exp(logp - batch[ACTION_LOGP])[mask].float().cpu())
    ratio = torch.cat(ratios)
    return {"ratio_mean": float(ratio.mean()), "ratio_std": float(ratio.std()), "ratio_tokens": int(ratio.numel())}


def measure(args: argparse.Namespace, setting: str) -> dict[str, Any]:
    import torch

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from learner_update import update

    algo = build(args, setting)
    try:
        episodes = algo.sample_episodes()
        row: dict[str, Any] = {"setting": setting, "rows": sum(len(e) for e in episodes),
                               **ratio_stats(algo, episodes)}
        minibatch = algo.config.minibatch_size
        row["minibatch_size"], row["micro_batch_size"] = minibatch, algo.config.micro_batch_size
        update(algo, episodes, minibatch)  # warm-up
        cuda = torch.cuda.is_available()
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        row["update_s"] = [device_timed(lambda: update(algo, episodes, minibatch)) for _ in range(args.repeats)]
        row["median_update_s"] = statistics.median(row["update_s"])
        row["peak_gb"] = torch.cuda.max_memory_allocated() / 1e9 if cuda else 0.0
        row["reserved_gb"] = torch.cuda.max_memory_reserved() / 1e9 if cuda else 0.0
    except torch.OutOfMemoryError as e:
        row = {"setting": setting, "error": f"out of memory: {str(e).splitlines()[0]}"}
    finally:
        algo.stop()
        import gc

        gc.collect()
        torch.cuda.empty_cache()
    print(setting, json.dumps(row), flush=True)
    return row


def report(data: dict[str, Any], results: Path, stem: str) -> str:
    rows = data["rows"]
    base = next((r["median_update_s"] for r in rows if r["setting"] == "before" and "median_update_s" in r), None)
    lines = [f"# One Learner update, {data['model_name']}, text Sokoban at GPU size ({data['date']}, {data['device']})", "",
             f"`python benchmarks/learner_memory.py --model {data['model_name']}` (commit {data.get('commit', '?')}): "
             f"model sha256 {data.get('model_sha256', '?')}. Each setting a fresh build (seed {data['seed']}), one "
             f"sampled batch, a warm-up update, then {data['repeats']} timed updates; peak = the card's peak allocated "
             "memory over them (the sampler's copy of the model included). Ratio = exp(learner - sampler log-prob) "
             f"per response token before any update. Load average before / after: {data['load_avg_before']} / "
             f"{data.get('load_avg_after')}.", "",
             "| setting | rows | minibatch / micro | s / update (median) | vs before | peak GB | reserved GB | ratio mean | ratio std |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['setting']} | | | {r['error']} | | | | | |")
            continue
        speed = f"{base / r['median_update_s']:.2f}x" if base else ""
        lines.append(f"| {r['setting']} | {r['rows']} | {r['minibatch_size']} / {r['micro_batch_size']} | "
                     f"{r['median_update_s']:.2f} ({', '.join(f'{t:.2f}' for t in r['update_s'])}) | {speed} | "
                     f"{r['peak_gb']:.1f} | {r['reserved_gb']:.1f} | {r['ratio_mean']:.4f} | {r['ratio_std']:.4f} |")
    text = "\n".join(lines) + "\n"
    results.mkdir(parents=True, exist_ok=True)
    (results / f"{stem}.json").write_text(json.dumps(data, indent=2))
    (results / f"{stem}.md").write_text(text)
    return text


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="Hugging Face id, local folder or .gguf file")
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=SETTINGS)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("/tmp/learner_memory"))
    parser.add_argument("--results-dir", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--commit", default=None,
                        help="the commit measured, for the report (default: git rev-parse HEAD of this checkout; "
                             "give it where the tree travelled without its own .git)")
    parser.add_argument("--dry-run", action="store_true", help="on a CPU (a tiny --model): checks the script, no memory")
    parser.add_argument("--stem", default=None, help="results file stem (default learner_memory_<model file stem>)")
    args = parser.parse_args(argv)
    import hashlib
    import subprocess

    import ray
    import torch

    from rllib_llm.core.models import load_causal_lm, load_tokenizer

    if not torch.cuda.is_available() and not args.dry_run:
        raise SystemExit("learner_memory.py measures GPU memory: run it on a machine with a CUDA GPU (or --dry-run)")
    args.out.mkdir(parents=True, exist_ok=True)
    load_causal_lm(args.model, load_tokenizer(args.model))  # a GGUF converted once, outside the timings
    model_file = Path(args.model)
    sha = None
    if model_file.is_file():
        digest = hashlib.sha256()
        with open(model_file, "rb") as f:
            for block in iter(lambda: f.read(1 << 24), b""):
                digest.update(block)
        sha = digest.hexdigest()
    commit = args.commit or subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                           text=True).stdout.strip()
    ray.init(num_cpus=8, num_gpus=int(torch.cuda.is_available()), include_dashboard=False, log_to_driver=False, configure_logging=False)
    data: dict[str, Any] = {"model_name": model_file.name or args.model, "model": args.model, "model_sha256": sha,
                            "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu", "torch": torch.__version__, "commit": commit or None,
                            "date": time.strftime("%Y-%m-%d"), "seed": args.seed, "repeats": args.repeats,
                            "load_avg_before": load_average(), "rows": []}
    for setting in args.settings:
        data["rows"].append(measure(args, setting))
        (args.out / "learner_memory.json").write_text(json.dumps(data, indent=2))
    ray.shutdown()
    data["load_avg_after"] = load_average()
    (args.out / "learner_memory.json").write_text(json.dumps(data, indent=2))
    stem = args.stem or f"learner_memory_{Path(args.model).stem}"
    print(report(data, args.results_dir, stem))


if __name__ == "__main__":
    main()

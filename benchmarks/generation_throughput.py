"""Decode throughput: plain ``model.generate`` against the ``hf`` backend's eager, static and CUDA-graph loops.

Every method samples (temperature 1, top-p 1) exactly ``--new-tokens`` tokens per prompt (eos ignored, no
stop strings) from random prompts of ``--prompt-len`` tokens. For each method and batch size:

- tokens/s = batch * new_tokens / (median wall time of a whole call, prefill included);
- ms per decode step = (T(new_tokens) - T(1)) / (new_tokens - 1), i.e. prefill taken out;
- bandwidth bound: each decode step must read every weight once plus the live KV cache, so
  bound_ms = (parameter bytes + batch * mean context * KV bytes per token) / HBM bandwidth, and
  ``bw_frac`` = bound_ms / measured ms per step.

Run (GPU): ``python benchmarks/generation_throughput.py --device cuda``;
(CPU, small): ``python benchmarks/generation_throughput.py --device cpu --size tiny --batch-sizes 2,8``.
Writes JSON (and with ``--markdown`` a table) under benchmarks/results/.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rllib_llm.generation import SamplingParams, make_backend  # noqa: E402
from rllib_llm.generation.static import cache_length_bucket  # noqa: E402

SIZES: dict[str, dict[str, Any]] = {
    # SmolLM2-135M's shape (the embedded model), randomly initialised.
    "smollm2-135m": dict(
        vocab_size=49152,
        hidden_size=576,
        intermediate_size=1536,
        num_hidden_layers=30,
        num_attention_heads=9,
        num_key_value_heads=3,
        max_position_embeddings=8192,
        rope_theta=100000.0,
        tie_word_embeddings=True,
    ),
    "tiny": dict(
        vocab_size=512,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
    ),
}
BACKEND_OPTIONS = {
    "eager": {"static_cache": False},
    "static": {"static_cache": True, "cuda_graphs": False},
    "graph": {"cuda_graphs": True},
    "static_compile": {"static_cache": True, "cuda_graphs": False, "compile": True},
    "graph_compile": {"cuda_graphs": True, "compile": True},
}


class NullTokenizer:
    """Ids only: the benchmark uses no stop strings, so decoding text would only add host time."""

    def __init__(self, eos_token_id: int, pad_token_id: int) -> None:
        self.eos_token_id, self.pad_token_id = eos_token_id, pad_token_id

    def decode(self, ids: list[int], **kwargs: Any) -> str:
        return ""


def build(args: argparse.Namespace, device: torch.device, dtype: torch.dtype):
    if args.model:
        from rllib_llm.core.models import load_causal_lm, load_tokenizer

        tokenizer = load_tokenizer(args.model)
        model = load_causal_lm({"name_or_path": args.model}, tokenizer)
    else:
        from transformers import LlamaConfig, LlamaForCausalLM

        torch.manual_seed(0)
        model = LlamaForCausalLM(LlamaConfig(**SIZES[args.size], bos_token_id=1, eos_token_id=2, pad_token_id=0))
        tokenizer = NullTokenizer(eos_token_id=2, pad_token_id=0)
    return model.to(device, dtype).eval(), tokenizer


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn, device: torch.device, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        sync(device)
        start = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


_BACKENDS: dict[str, Any] = {}


def shared_backend(method: str, model, tokenizer, args: argparse.Namespace):
    """One backend per method for the whole run, as in training (graphs/compilation are reused)."""
    if method not in _BACKENDS:
        sizes = [int(b) for b in args.batch_sizes.split(",")]
        _BACKENDS[method] = make_backend(
            "hf",
            model=model,
            tokenizer=tokenizer,
            max_batch_size=max(sizes + [8]),
            batch_buckets=tuple(sorted(set(sizes))),
            sync_every=args.sync_every,
            **BACKEND_OPTIONS[method],
        )
    return _BACKENDS[method]


def runner(method: str, model, tokenizer, batch: int, args: argparse.Namespace, top_p: float = 1.0):
    """A function (new_tokens, prompts) -> None that runs one generation call."""
    if method == "generate":

        def run(new_tokens: int, prompts: torch.Tensor) -> None:
            with torch.no_grad():
                model.generate(
                    input_ids=prompts,
                    attention_mask=torch.ones_like(prompts),
                    do_sample=True,
                    temperature=1.0,
                    top_p=top_p,
                    top_k=0,
                    max_new_tokens=new_tokens,
                    min_new_tokens=new_tokens,
                    pad_token_id=tokenizer.pad_token_id,
                )

        return run, None
    backend = shared_backend(method, model, tokenizer, args)

    def run(new_tokens: int, prompts: torch.Tensor) -> None:
        params = SamplingParams(top_p=top_p, max_new_tokens=new_tokens, stop=[], ignore_eos=True, seed=0)
        outs = backend.generate(prompts.tolist(), params)
        assert all(len(o.token_ids) == new_tokens for o in outs)

    return run, backend


def kv_bytes_per_token(model) -> int:
    config = model.config
    heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    return config.num_hidden_layers * 2 * heads * head_dim * next(model.parameters()).element_size()


def measure(method: str, model, tokenizer, batch: int, args, device, top_p: float = 1.0) -> dict[str, Any]:
    label = method if top_p == 1.0 else f"{method} top_p={top_p}"
    row: dict[str, Any] = {"method": label, "batch": batch}
    try:
        gen = torch.Generator().manual_seed(batch)
        prompts = torch.randint(3, model.config.vocab_size, (batch, args.prompt_len), generator=gen).to(device)
        run, backend = runner(method, model, tokenizer, batch, args, top_p)
        repeats = args.repeats if method == "graph" else 1  # the slow loops vary little between calls
        first = timed(lambda: run(8, prompts), device, 1)  # warm-up (and graph capture)
        total = timed(lambda: run(args.new_tokens, prompts), device, repeats)
        prefill = timed(lambda: run(1, prompts), device, repeats)
        step_ms = 1e3 * (total - prefill) / (args.new_tokens - 1)
        context = args.prompt_len + (args.new_tokens - 1) / 2
        param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        kv_live = batch * context * kv_bytes_per_token(model)
        bound_ms = 1e3 * (param_bytes + kv_live) / (args.hbm_tbps * 1e12)
        row.update(
            tokens_per_s=batch * args.new_tokens / total,
            ms_per_step=step_ms,
            call_s=total,
            prefill_s=prefill,
            first_call_s=first,
            bound_ms=bound_ms,
            bw_frac=bound_ms / step_ms if step_ms > 0 else None,
        )
        if backend is not None:
            row["stats"] = dict(backend.stats)
            row["cache_columns"] = cache_length_bucket(args.prompt_len + args.new_tokens - 1)
    except Exception as e:  # keep measuring the other rows; the error goes into the results
        traceback.print_exc()
        row["error"] = f"{type(e).__name__}: {e}"
    print(json.dumps({k: v for k, v in row.items() if k != "stats"}), flush=True)
    return row


def agreement(model, tokenizer, args, baseline: str, other: str, batch: int = 8, fresh: bool = False) -> dict[str, Any]:
    """Greedy outputs of two loops on the same prompts: exact-match rows and agreeing token prefix."""
    try:
        gen = torch.Generator().manual_seed(1)
        prompts = torch.randint(3, model.config.vocab_size, (batch, args.prompt_len), generator=gen).tolist()
        params = SamplingParams(greedy=True, max_new_tokens=args.check_tokens, stop=[], ignore_eos=True)
        outs = []
        for method in (baseline, other):
            if fresh:
                backend = make_backend("hf", model=model, tokenizer=tokenizer, **BACKEND_OPTIONS[method])
            else:
                backend = shared_backend(method, model, tokenizer, args)
            outs.append(backend.generate(prompts, params))
        prefix = []
        for a, b in zip(*outs, strict=True):
            same = next((i for i, (x, y) in enumerate(zip(a.token_ids, b.token_ids, strict=True)) if x != y), None)
            prefix.append(len(a.token_ids) if same is None else same)
        diffs = [
            abs(x - y)
            for a, b, p in zip(*outs, prefix, strict=True)
            for x, y in zip(a.logprobs[:p], b.logprobs[:p], strict=True)
        ]
        return {
            "pair": f"{baseline} vs {other}",
            "dtype": str(next(model.parameters()).dtype),
            "rows_identical": sum(p == args.check_tokens for p in prefix),
            "rows": batch,
            "mean_agreeing_prefix": sum(prefix) / batch,
            "max_logprob_diff_on_common_prefix": max(diffs, default=None),
        }
    except Exception as e:
        traceback.print_exc()
        return {"pair": f"{baseline} vs {other}", "error": f"{type(e).__name__}: {e}"}


def markdown(results: dict[str, Any]) -> str:
    rows = results["rows"]
    base = {r["batch"]: r.get("tokens_per_s") for r in rows if r["method"] == "generate"}
    lines = [
        "| method | batch | tokens/s | ms / decode step | x generate | bound ms (weights+KV) | fraction of bound |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['method']} | {r['batch']} | error: {r['error'][:80]} | | | | |")
            continue
        speedup = r["tokens_per_s"] / base[r["batch"]] if base.get(r["batch"]) else float("nan")
        lines.append(
            f"| {r['method']} | {r['batch']} | {r['tokens_per_s']:,.0f} | {r['ms_per_step']:.2f} | {speedup:.1f} "
            f"| {r['bound_ms']:.3f} | {r['bw_frac']:.1%} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--size", choices=sorted(SIZES), default="smollm2-135m", help="random model of this shape")
    parser.add_argument("--model", help="load this model (rllib_llm.core.models name / HF id / path) instead")
    parser.add_argument("--dtype", choices=["bfloat16", "float16", "float32"], help="default: bf16 on GPU, fp32 on CPU")
    parser.add_argument("--batch-sizes", default="8,64,256")
    parser.add_argument("--methods", default="generate,eager,static,graph", help="of generate, eager, static, graph")
    parser.add_argument("--prompt-len", type=int, default=128)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sync-every", type=int, default=8)
    parser.add_argument("--top-p-extra", type=float, default=None, help="also time graph with this top_p")
    parser.add_argument("--hbm-tbps", type=float, default=4.8, help="memory bandwidth for the bound (H200: 4.8)")
    parser.add_argument("--check", action="store_true", help="greedy agreement checks between loops")
    parser.add_argument("--check-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1, help="CPU threads (0: torch's default)")
    parser.add_argument("--out", help="JSON path (default benchmarks/results/generation_<device>_<size>.json)")
    parser.add_argument("--markdown", help="also write the table here")
    args = parser.parse_args(argv)

    device = torch.device(args.device)
    if device.type == "cpu" and args.threads:
        torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype or ("bfloat16" if device.type == "cuda" else "float32"))
    model, tokenizer = build(args, device, dtype)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    if device.type != "cuda":
        methods = list(dict.fromkeys(m.replace("graph", "static") for m in methods))
    batches = [int(b) for b in args.batch_sizes.split(",")]
    meta = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu",
        "torch": torch.__version__,
        "transformers": __import__("transformers").__version__,
        "python": platform.python_version(),
        "dtype": str(dtype),
        "model": args.model or f"random {args.size}",
        "parameters": sum(p.numel() for p in model.parameters()),
        "parameter_bytes": sum(p.numel() * p.element_size() for p in model.parameters()),
        "kv_bytes_per_token": kv_bytes_per_token(model),
        "args": vars(args),
    }
    print(json.dumps(meta), flush=True)
    out = Path(args.out or Path(__file__).parent / "results" / f"generation_{device.type}_{args.size}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"meta": meta, "rows": [], "checks": []}

    def save() -> None:  # after every row, so a run cut short keeps what it measured
        order = {m: i for i, m in enumerate(methods)}
        results["rows"].sort(key=lambda r: (r["batch"], order.get(r["method"].split()[0], len(order))))
        out.write_text(json.dumps(results, indent=2))

    fast = "graph" if device.type == "cuda" else "static"
    # Slow-to-build methods (compilation) last, so the others are in the file whatever happens.
    for method in sorted(methods, key=lambda m: "compile" in m):
        for batch in batches:
            results["rows"].append(measure(method, model, tokenizer, batch, args, device))
            save()
        if method == fast and args.top_p_extra is not None:
            for batch in batches:
                results["rows"].append(measure(fast, model, tokenizer, batch, args, device, top_p=args.top_p_extra))
                save()
        if method == fast and args.check:
            if device.type == "cuda":
                results["checks"].append(agreement(model, tokenizer, args, "static", "graph"))
            results["checks"].append(agreement(model, tokenizer, args, "eager", fast))
            save()
        if "compile" in method and args.check:
            results["checks"].append(agreement(model, tokenizer, args, "static", method))
            save()
    if args.check and dtype != torch.float32:
        results["checks"].append(agreement(model.float(), tokenizer, args, "eager", fast, fresh=True))
        model.to(dtype)
        save()
    table = markdown(results)
    if args.markdown:
        Path(args.markdown).write_text(table + "\n")
    print(table)
    for check in results["checks"]:
        print(json.dumps(check))
    print(f"wrote {out}")
    return results


if __name__ == "__main__":
    main()

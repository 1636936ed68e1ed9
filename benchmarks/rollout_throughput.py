"""Rollout throughput: env steps/s and generated tokens/s, batched generation against one env at a time.

    python benchmarks/rollout_throughput.py                          # 8, 32, 128 envs, CPU, embedded model
    python benchmarks/rollout_throughput.py --size medium            # longer episodes and responses
    python benchmarks/rollout_throughput.py --device cuda --size large --envs 8 32 128 512

Why: the EnvRunner steps all envs of a rollout in lock step and answers all their prompts with one batched
generate call per step. The baseline a user would write first is an agent loop that serves one env at a
time: one generate call per env per step. Both modes here run the same LLMEnvRunner (the main job's tuned
example, tuned_examples/numberline_gigpo.py, with the embedded SmolLM2-135M-Instruct) with the same seeds;
the only difference is a wrapper around its backend that either passes the batch through or makes one
call per prompt. Responses are fixed-length (``max_new_tokens`` tokens, no stop string, eos ignored) so
both modes generate the same number of tokens. Times are the wall time of ``runner.sample()`` (prompt
building and env steps included) after one warm-up rollout; ``generate_s`` is the part spent generating.
``--size``: small (2 env steps, 8 new tokens), medium (4, 16), large (6, 32) or a number of env steps.
Writes benchmarks/results/rollout_throughput.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: `benchmarks._common` importable

import torch  # noqa: E402

from benchmarks._common import (  # noqa: E402
    apply_threads,
    load_1m,
    main_job_config,
    output_argument,
    print_table,
    resolve_size,
    size_argument,
    threads_argument,
    write_results,
)
from rllib_llm.columns import RESPONSE  # noqa: E402
from rllib_llm.core.single_agent_env_runner import LLMEnvRunner
from rllib_llm.generation import GenerationBackend, GenerationOutput, SamplingParams  # noqa: E402
from rllib_llm.generation.vllm import import_vllm, sampling_kwargs, tokens_prompt  # noqa: E402

NAME = "rollout_throughput"
PRESETS = {
    "small": {"steps": 2, "new_tokens": 8},
    "medium": {"steps": 4, "new_tokens": 16},
    "large": {"steps": 6, "new_tokens": 32},
}
MODES = ("batched", "one_at_a_time")


class TimedBackend(GenerationBackend):
    """Wraps the runner's backend: times generation; ``one_at_a_time`` makes one call per prompt."""

    def __init__(self, inner: GenerationBackend, one_at_a_time: bool) -> None:
        self.inner, self.one_at_a_time = inner, one_at_a_time
        self.seconds, self.calls = 0.0, 0
        #: Every batch it was given, to replay through the bare engine (:func:`raw_vllm_seconds`).
        self.requests: list[tuple[list[list[int]], SamplingParams]] = []

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[GenerationOutput]:
        self.requests.append((prompts, params))
        start = time.perf_counter()
        if self.one_at_a_time:
            outputs = [self.inner.generate([prompt], params)[0] for prompt in prompts]
        else:
            outputs = self.inner.generate(prompts, params)
        self.calls += len(prompts) if self.one_at_a_time else 1
        self.seconds += time.perf_counter() - start
        return outputs

    def update_weights(self, state: dict[str, Any]) -> None:
        self.inner.update_weights(state)


def build_runner(model: str, steps: int, new_tokens: int, device: str, max_batch_size: int | None,
                 backend: str = "hf", backend_options: dict[str, Any] | None = None,
                 dtype: str | None = None) -> LLMEnvRunner:
    """The main job's EnvRunner with fixed-length responses and ``steps``-step episodes, its module on
    ``device`` in ``dtype`` (the ``hf`` backend generates wherever the module's weights are; ``vllm`` in its
    own engine, built from the module's weights before they move)."""
    options = {"max_batch_size": max_batch_size} if max_batch_size and backend == "hf" else {}
    options.update(backend_options or {})
    config = (
        main_job_config(model)
        .generation(max_new_tokens=new_tokens, stop=[], ignore_eos=True, backend=backend, backend_options=options)
        .group_rollouts(group_size=1, num_groups=1, max_episode_steps=steps)
    )
    if dtype:  # the module is built in it, so a vllm engine (built from the module's weights) gets it too
        config.llm(model={**config.llm_model, "inference_dtype": dtype})
    config.validate()
    runner = LLMEnvRunner(config=config)
    runner.module.to(device=device, dtype=getattr(torch, dtype) if dtype else None)
    return runner


def raw_vllm_seconds(backend: GenerationBackend, requests: list[tuple[list[list[int]], SamplingParams]]) -> float | None:
    """The same prompts replayed through the bare ``vllm.LLM.generate`` of an in-process vllm backend, as a user
    would call it: one ``vllm.SamplingParams`` for the batch, same temperature, top-p, length and stop strings, no
    per-request seeds or log-probs, outputs not parsed. ``None`` for any other backend. The ceiling the issue
    compares the EnvRunner with ("the best backend >= 0.9x of raw vLLM generate on the same prompts")."""
    llm = getattr(backend, "llm", None)
    if llm is None:
        return None
    vllm = import_vllm()
    seconds = 0.0
    for prompts, params in requests:
        kwargs = {k: v for k, v in sampling_kwargs(params).items() if k not in ("logprobs", "seed")}
        start = time.perf_counter()
        llm.generate([tokens_prompt(p) for p in prompts], vllm.SamplingParams(**kwargs), use_tqdm=False,
                     lora_request=getattr(backend, "lora_request", None))
        seconds += time.perf_counter() - start
    return seconds


def measure(runner: LLMEnvRunner, inner: GenerationBackend, envs: int, mode: str) -> dict[str, Any]:
    """One rollout of ``envs`` envs (one seed each, the same seeds for every mode)."""
    backend = TimedBackend(inner, one_at_a_time=mode == "one_at_a_time")
    runner.backend = backend
    start = time.perf_counter()
    episodes = runner.sample(seeds=list(range(envs)), group_size=1)
    wall = time.perf_counter() - start
    steps = sum(len(ep) for ep in episodes)
    tokens = sum(len(r) for ep in episodes for r in ep.get_extra_model_outputs(RESPONSE))
    row = {
        "envs": envs,
        "mode": mode,
        "env_steps": steps,
        "generated_tokens": tokens,
        "generate_calls": backend.calls,
        "wall_s": wall,
        "generate_s": backend.seconds,
        "env_steps_per_s": steps / wall,
        "tokens_per_s": tokens / wall,
        # The generate calls alone on the same prompts, and the whole EnvRunner's share of it (1.0: the
        # prompt building, parsing and env steps around generation cost nothing).
        "generate_tokens_per_s": tokens / backend.seconds if backend.seconds > 0 else None,
        "runner_vs_generate": backend.seconds / wall,
        "load_avg_1m": load_1m(),
    }
    raw = raw_vllm_seconds(inner, backend.requests) if mode == "batched" else None
    if raw is not None:
        # The whole EnvRunner against the bare engine on the same prompts (1.0: the EnvRunner adds nothing).
        row.update(raw_vllm_s=raw, raw_vllm_tokens_per_s=tokens / raw, runner_vs_raw_vllm=raw / wall)
    print(f"  {envs:>4} envs {mode:>13}: {wall:7.1f} s, {row['env_steps_per_s']:.2f} env steps/s", flush=True)
    return row


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    size_argument(parser, "env steps per episode")
    parser.add_argument("--envs", type=int, nargs="+", default=[8, 32, 128], help="parallel env counts")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--max-batch-size", type=int, help="the hf backend's (default: the library's, 64)")
    parser.add_argument("--backend", choices=("hf", "vllm"), default="hf", help="the generation backend")
    parser.add_argument("--backend-options", type=json.loads, default=None,
                        help="JSON of generation backend options (vllm: gpu_memory_utilization, engine_kwargs, ...)")
    parser.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), default=None,
                        help="the EnvRunner module's dtype on --device (default: the model's)")
    threads_argument(parser)
    output_argument(parser, NAME)
    args = parser.parse_args(argv)
    size = resolve_size(args.size, PRESETS, "steps")
    apply_threads(args.threads)
    runner = build_runner(args.model, size["steps"], size["new_tokens"], args.device, args.max_batch_size,
                          args.backend, args.backend_options, args.dtype)
    inner = runner.backend
    try:
        runner.sample(seeds=[10**6], group_size=1)  # warm-up: first-call allocations, lazy imports
        print(f"{size['steps']} env steps x {size['new_tokens']} new tokens per env, {args.device}:", flush=True)
        rows = [measure(runner, inner, envs, mode) for envs in args.envs for mode in args.modes]
    finally:
        runner.stop()
    by_key = {(r["envs"], r["mode"]): r for r in rows}
    speedups = {
        str(envs): by_key[envs, "batched"]["env_steps_per_s"] / by_key[envs, "one_at_a_time"]["env_steps_per_s"]
        for envs in args.envs
        if (envs, "batched") in by_key and (envs, "one_at_a_time") in by_key
    }
    for row in rows:
        row["speedup_vs_one_at_a_time"] = speedups.get(str(row["envs"])) if row["mode"] == "batched" else None
    print_table(
        rows,
        [
            "envs",
            "mode",
            "env_steps",
            "generated_tokens",
            ("wall_s", ".1f"),
            ("generate_s", ".1f"),
            ("env_steps_per_s", ".2f"),
            ("tokens_per_s", ".1f"),
            ("generate_tokens_per_s", ".1f"),
            ("runner_vs_generate", ".2f"),
            ("runner_vs_raw_vllm", ".2f"),
            ("speedup_vs_one_at_a_time", ".1f"),
            ("load_avg_1m", ".1f"),
        ],
    )
    summary = {"model": args.model, "device": args.device, "backend": args.backend, "dtype": args.dtype, **size,
               "speedup_by_envs": speedups}
    write_results(args.output, NAME, args, rows, summary=summary)
    return {"rows": rows, "summary": summary}


if __name__ == "__main__":
    main()

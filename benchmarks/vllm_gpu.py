"""vLLM-backed EnvRunners on the lent GPU (issue 23): weight sync, colocation memory, log-prob agreement,
and training through ``rllib-llm train`` with ``.generation(backend="vllm")`` next to ``hf``.

Runs on a machine with a GPU and ``pip install vllm`` (measured with vLLM 0.24). Steps:

    python benchmarks/vllm_gpu.py measure --out $OUT [--sections sync135 logprobs big lora]
    python benchmarks/vllm_gpu.py train --budget-s 360 [--detach]     # the training runs, one process each
    python benchmarks/vllm_gpu.py report --out $OUT                    # vllm_h200.{json,md} from both

Engines on one card: give each a fixed ``kv_cache_memory_bytes`` (benchmarks/async_gpu.py) or start them one at
a time (notes/vllm.md: engines starting together fail to size their KV cache from a share of the card).

``measure``:
- ``sync135``: the embedded SmolLM2-135M-Instruct (bf16 on cuda:0) in a ``VLLMBackend``; full-weight
  ``update_weights`` timed with ``weight_sync="pickle"`` and ``"cuda_ipc"`` (3 syncs each, after perturbing
  the weights, so every sync moves new numbers), and a check that the engine took them: its log-probs of
  its own samples against an fp32 forward of the perturbed model.
- ``logprobs``: the same engine on chat prompts (NumberLine observations in the main job's format) at
  temperature 1.0 and 0.7: |vLLM - Learner| per response token (the Learner's log-probs: the module's
  ``token_logprobs`` on an fp32 forward) and the PPO ratio exp(learner - sampler) it gives at iteration 1.
- ``lora``: LoRA hot-swap time (``lora_swaps``) for the embedded model and the Qwen2.5-1.5B shape, with the
  main job's LoRA spec: each sync's ``update_weights`` and the extra time of the first rollout after it.
- ``big``: a random model of Qwen2.5-1.5B's shape: full-weight sync time (pickle vs CUDA IPC), and the peak
  GPU memory of one rollout + Learner update (fp32 weights, AdamW, a 16 x 512-token batch) with the engine
  awake during the update vs asleep (``sleep_between_rollouts``: vLLM's sleep mode, level 1).

``qwen15``: writes that random 1.5B-shaped model (with the embedded model's tokenizer) to ``WORK/qwen15`` and
prints the path, for ``benchmarks/rollout_throughput.py --model /root/work/vllm/qwen15 --device cuda --dtype bfloat16
--backend {hf,vllm}`` (issue 23's rollout throughput at 1.5B).

``train``: the main job (tuned_examples/numberline_gigpo.py) at GPU size (8 groups x 4) through ``python -m
rllib_llm.run.cli train`` (a wrapper example per run) with ``hf`` and with
``vllm`` on the same seeds (LoRA, as shipped), ``vllm`` with full weights (CUDA IPC sync, lr 1e-5), ``vllm``
with the engine asleep while the Learner trains, text Sokoban and multi-agent tic-tac-toe with ``vllm``.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import device_timed  # noqa: E402

WORK = Path(os.environ.get("VLLM_GPU_WORK", "/root/work/vllm"))
MODEL = "smollm2-135m-instruct"
#: Every engine here: FlashAttention (the carried vLLM has no flashinfer).
ENGINE = {"attention_backend": "FLASH_ATTN"}
#: Qwen2.5-1.5B's shape (its config.json), random weights: no download.
QWEN15 = dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
              num_key_value_heads=2, vocab_size=151936, max_position_embeddings=4096, rope_theta=1e6,
              tie_word_embeddings=True, rms_norm_eps=1e-6)


def log(*args: Any) -> None:
    print(f"[{time.strftime('%H:%M:%S')}]", *args, flush=True)


def save(out: Path, name: str, data: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / name).write_text(json.dumps(data, indent=1, default=str))


def gpu_used_gib() -> float:
    import torch

    free, total = torch.cuda.mem_get_info()
    return (total - free) / 2**30


# --- measure -------------------------------------------------------------------------------------------


def numberline_prompts(tokenizer: Any, n: int) -> list[list[int]]:
    """Chat prompts in the main job's format (system rules, the observation, the reply prefilled with
    ``<action>``) for ``n`` (target, position) states."""
    from tuned_examples.numberline_gigpo import SYSTEM_PROMPT

    prompts = []
    for i in range(n):
        target, position = i % 6, (i * 7 + 3) % 6
        messages = [{"role": "system", "content": SYSTEM_PROMPT},
                    {"role": "user", "content": f"Target: {target}. Current position: {position}. Your move?"}]
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        prompts.append(tokenizer(text + "Let me think. ", add_special_tokens=False)["input_ids"])
    return prompts


def learner_logprobs(model: Any, prompts: list[list[int]], responses: list[list[int]], temperature: float) -> list:
    """Per-token log-probs of each response under ``model`` (the Learner's side: ``response_logprobs``)."""
    import torch

    from rllib_llm.token_forward import one_response_logprobs

    with torch.no_grad():
        return [one_response_logprobs(model, prompt, response, temperature).tolist()
                for prompt, response in zip(prompts, responses, strict=True)]


def agreement(sampler: list[list[float]], learner: list[list[float]]) -> dict[str, float]:
    import math

    diffs = [s - v for a, b in zip(sampler, learner, strict=True) for s, v in zip(a, b, strict=True)]
    ratios = [math.exp(-d) for d in diffs]  # pi_learner / pi_sampler per token, before any update
    mean = sum(ratios) / len(ratios)
    return {
        "tokens": len(diffs),
        "max_abs_diff": max(abs(d) for d in diffs),
        "mean_abs_diff": sum(abs(d) for d in diffs) / len(diffs),
        "ratio_mean": mean,
        "ratio_std": (sum((r - mean) ** 2 for r in ratios) / len(ratios)) ** 0.5,
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "ratio_outside_clip_0.2": sum(abs(r - 1) > 0.2 for r in ratios) / len(ratios),
    }


def sample_and_compare(backend: Any, model32: Any, prompts: list[list[int]], temperature: float,
                       new_tokens: int = 48) -> dict:
    from rllib_llm.generation import SamplingParams

    outs = backend.generate(prompts, SamplingParams(temperature=temperature, max_new_tokens=new_tokens, seed=0,
                                                    stop=[]))
    responses = [list(o.token_ids) for o in outs]
    row = agreement([list(o.logprobs) for o in outs], learner_logprobs(model32, prompts, responses, temperature))
    row.update(temperature=temperature, rows=len(prompts), sample_text=outs[0].text[:60])
    return row


def perturb(model: Any, seed: int, scale: float = 0.01, adapters_only: bool = False) -> None:
    """Adds N(0, scale) noise to every weight (``adapters_only``: to the LoRA B matrices, which start at zero)."""
    import torch

    params = [p for n, p in model.named_parameters() if not adapters_only or "lora_B" in n]
    gen = torch.Generator(device=params[0].device).manual_seed(seed)
    with torch.no_grad():
        for p in params:
            p.add_(torch.randn(p.shape, generator=gen, device=p.device, dtype=torch.float32).to(p.dtype) * scale)


def lora_swaps(backend: Any, model: Any, prompts: list[list[int]], repeats: int = 3) -> list[dict[str, float]]:
    """LoRA hot-swap cost per sync (issue 23): ``update_weights`` saves the adapter and points the engine at a
    new ``LoRARequest`` (the base is never re-exported); vLLM loads that adapter when the next generate uses it.
    Per sync: the ``update_weights`` time, the first generate after it and a second one on the same prompts
    (adapter loaded); ``swap_s`` = sync + first - second, what a swap adds to a rollout."""
    from rllib_llm.generation import SamplingParams

    params = SamplingParams(temperature=1.0, max_new_tokens=16, seed=0, stop=[])
    backend.generate(prompts, params)  # warm-up (the base, or the adapter of an earlier sync)
    rows = []
    for r in range(repeats):
        perturb(model, seed=200 + r, scale=0.02, adapters_only=True)
        sync_s = device_timed(backend.update_weights, {})
        assert backend.last_sync == "lora", backend.last_sync
        first_s = device_timed(backend.generate, prompts, params)
        steady_s = device_timed(backend.generate, prompts, params)
        rows.append({"sync_s": sync_s, "first_generate_s": first_s, "steady_generate_s": steady_s,
                     "swap_s": sync_s + first_s - steady_s})
        log("lora swap", json.dumps(rows[-1]))
    return rows


def measure_lora(out: Path, results: dict, keys: tuple[str, ...] = ("smollm2_135m", "qwen2_5_1_5b_shape"),
                 tokenizer_name: str = MODEL) -> None:
    """``lora_swaps`` for the embedded model and for the Qwen2.5-1.5B shape (random weights, the embedded
    model's tokenizer: its ids are valid in the larger vocabulary), each with the main job's LoRA spec, bf16
    base, one engine at a time (``keys``: which of the two)."""
    import torch

    from rllib_llm.core.models import apply_lora, load_causal_lm, load_tokenizer
    from rllib_llm.generation import make_backend
    from rllib_llm.run.cli import load_tuned_example

    spec = load_tuned_example(ROOT / "tuned_examples" / "numberline_gigpo.py")[0].llm_model["lora"]
    tokenizer = load_tokenizer(tokenizer_name)
    prompts = numberline_prompts(tokenizer, 64)
    for key in keys:
        if key == "smollm2_135m":
            base = load_causal_lm(MODEL, tokenizer).to("cuda", torch.bfloat16).eval()
        else:
            base = qwen15_model(tokenizer)
        model = apply_lora(base, spec)
        r = results.setdefault(key, {})
        r["lora_spec"] = spec
        r["adapter_parameters"] = sum(p.numel() for n, p in model.named_parameters() if "lora_" in n)
        backend = make_backend("vllm", model=model, tokenizer=tokenizer, gpu_memory_utilization=0.3,
                               engine_kwargs=dict(ENGINE, max_model_len=2048))
        try:
            r["lora_swaps"] = lora_swaps(backend, model, prompts)
        finally:
            backend.llm.llm_engine.engine_core.shutdown()
            del backend, model, base
            torch.cuda.empty_cache()
        save(out, "vllm_measure.json", results)


def time_syncs(backend: Any, model: Any, modes: tuple[str, ...], repeats: int = 3) -> dict[str, list[float]]:
    repeats = int(os.environ.get("VLLM_GPU_SYNC_REPEATS", repeats))
    import torch

    times: dict[str, list[float]] = {}
    for mode in modes:
        backend.weight_sync = mode
        for r in range(repeats):
            perturb(model, seed=100 + r, scale=1e-3)
            torch.cuda.synchronize()
            start = time.perf_counter()
            backend.update_weights({})
            times.setdefault(mode, []).append(time.perf_counter() - start)
            assert backend.last_sync == ("apply_model" if mode == "pickle" else mode), backend.last_sync
        log("sync", mode, [f"{t:.3f}" for t in times[mode]])
    return times


def measure_135m(out: Path, results: dict, sections: list[str]) -> None:
    import torch

    from rllib_llm.core.models import load_causal_lm, load_tokenizer
    from rllib_llm.generation import make_backend

    tokenizer = load_tokenizer(MODEL)
    model = load_causal_lm(MODEL, tokenizer).to("cuda", torch.bfloat16).eval()
    r = results.setdefault("smollm2_135m", {})
    r["parameters"] = sum(p.numel() for p in model.parameters())
    r["bytes_bf16"] = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    start = time.perf_counter()
    backend = make_backend("vllm", model=model, tokenizer=tokenizer, gpu_memory_utilization=0.15,
                           engine_kwargs=dict(ENGINE))
    r["engine_init_s"] = time.perf_counter() - start
    prompts = numberline_prompts(tokenizer, 64)
    if "logprobs" in sections:
        model32 = copy.deepcopy(model).float()
        r["logprobs"] = [sample_and_compare(backend, model32, prompts, t) for t in (1.0, 0.7)]
        log("logprobs", json.dumps(r["logprobs"]))
        del model32
        save(out, "vllm_measure.json", results)
    if "sync135" in sections:
        r["sync_s"] = time_syncs(backend, model, ("pickle", "cuda_ipc"))
        perturb(model, seed=7, scale=0.02)  # a visible change; then the engine must agree with the new weights
        backend.weight_sync = "cuda_ipc"
        backend.update_weights({})
        model32 = copy.deepcopy(model).float()
        r["after_ipc_sync_logprobs"] = sample_and_compare(backend, model32, prompts[:16], 1.0)
        log("after sync", json.dumps(r["after_ipc_sync_logprobs"]))
        save(out, "vllm_measure.json", results)
    backend.llm.llm_engine.engine_core.shutdown()
    del backend, model
    torch.cuda.empty_cache()


def qwen15_model(tokenizer: Any = None) -> Any:
    """A random model of Qwen2.5-1.5B's shape (bf16, on the GPU), saved once to ``WORK/qwen15`` with
    ``tokenizer`` (the embedded model's: its ids are valid in the larger vocabulary) so that vLLM engines and
    ``benchmarks/rollout_throughput.py --model WORK/qwen15`` load the same weights; ``config._name_or_path``
    points there."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    folder = WORK / "qwen15"
    torch.manual_seed(0)
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        model = Qwen2ForCausalLM(Qwen2Config(**QWEN15)).to(torch.bfloat16).eval()
    if not (folder / "config.json").is_file():
        model.save_pretrained(folder)
    if tokenizer is not None and not (folder / "tokenizer_config.json").is_file():
        tokenizer.save_pretrained(folder)
    model.config._name_or_path = str(folder)  # the engine loads the saved folder, not a re-export
    return model


def measure_big(out: Path, results: dict) -> None:
    """Qwen2.5-1.5B-shaped random model: sync times and colocation memory (see the module docstring)."""
    import torch

    from rllib_llm.generation import make_backend

    r = results.setdefault("qwen2_5_1_5b_shape", {})
    model = qwen15_model()
    r["parameters"] = sum(p.numel() for p in model.parameters())
    r["gpu_used_gib_model_only"] = gpu_used_gib()
    engine = dict(ENGINE, skip_tokenizer_init=True, enforce_eager=True, max_model_len=1024)
    start = time.perf_counter()
    backend = make_backend("vllm", model=model, tokenizer=None, gpu_memory_utilization=0.35, engine_kwargs=engine,
                           sleep_between_rollouts=True)
    r["engine_init_s"] = time.perf_counter() - start
    r["sync_s"] = time_syncs(backend, model, ("pickle", "cuda_ipc"))
    save(out, "vllm_measure.json", results)

    import vllm

    def rollout() -> None:
        backend._wake_up()
        prompts = [{"prompt_token_ids": [int(t) for t in torch.randint(100, 50000, (256,))]} for _ in range(64)]
        backend.llm.generate(prompts, vllm.SamplingParams(max_tokens=128, ignore_eos=True, detokenize=False),
                             use_tqdm=False)

    learner = copy.deepcopy(model).float().train()
    optimizer = torch.optim.AdamW(learner.parameters(), lr=1e-6)

    def update() -> None:
        batch = torch.randint(100, 50000, (16, 512), device="cuda")
        for rows in batch.split(4):  # 4 micro-batches of 4 x 512 tokens, one optimizer step
            learner(input_ids=rows, labels=rows).loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        torch.cuda.synchronize()

    for label, asleep in (("engine awake during the update", False), ("engine asleep during the update", True)):
        rollout()
        if asleep:
            backend.release_memory()
        torch.cuda.empty_cache()  # the last case's cached blocks must not count as this one's
        torch.cuda.reset_peak_memory_stats()
        before = gpu_used_gib()
        own_before = torch.cuda.memory_reserved() / 2**30
        row: dict[str, Any] = {"case": label, "gpu_used_gib_before_update": before,
                               "engine_and_other_gib": before - own_before}
        try:
            start = time.perf_counter()
            update()
            row["update_s"] = time.perf_counter() - start
            peak_own = torch.cuda.max_memory_reserved() / 2**30
            row["learner_process_peak_reserved_gib"] = peak_own
            # The device's peak: what the engine (another process) held + this process's peak.
            row["device_peak_gib"] = before - own_before + peak_own
            start = time.perf_counter()
            backend.update_weights({})  # wakes the weights if asleep, then syncs
            row["wake_and_sync_s"] = time.perf_counter() - start
            start = time.perf_counter()
            rollout()
            row["next_rollout_s"] = time.perf_counter() - start
        except torch.OutOfMemoryError as e:
            row["error"] = f"OutOfMemoryError: {str(e).splitlines()[0]}"
            optimizer.zero_grad(set_to_none=True)
            torch.cuda.empty_cache()
        r.setdefault("colocation", []).append(row)
        log(json.dumps(row))
        save(out, "vllm_measure.json", results)
    r["gpu_total_gib"] = torch.cuda.mem_get_info()[1] / 2**30
    backend.llm.llm_engine.engine_core.shutdown()


#: ``measure`` sections of one model's LoRA swaps (``lora``: both) -> the results key.
LORA_SECTIONS = {"lora_135m": "smollm2_135m", "lora_1p5b": "qwen2_5_1_5b_shape"}


def measure(out: Path, sections: list[str], tokenizer_name: str = MODEL) -> None:
    import torch
    import vllm

    results: dict[str, Any] = {"meta": {"vllm": vllm.__version__, "torch": torch.__version__,
                                        "gpu": torch.cuda.get_device_name(0), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                        "sections": sections}}
    WORK.mkdir(parents=True, exist_ok=True)
    steps = []
    if {"sync135", "logprobs"} & set(sections):
        steps.append(("135m", lambda: measure_135m(out, results, sections)))
    if "big" in sections:
        steps.append(("big", lambda: measure_big(out, results)))
    lora = [key for section, key in LORA_SECTIONS.items() if {"lora", section} & set(sections)]
    if lora:  # lora_1p5b alone needs no GGUF (with --tokenizer); the two halves can run in separate calls
        steps.append(("lora", lambda: measure_lora(out, results, tuple(lora), tokenizer_name)))
    for name, fn in steps:
        try:
            fn()
        except Exception as e:  # noqa: BLE001  (one failed section must not lose the others' numbers)
            import traceback

            traceback.print_exc()
            results.setdefault("errors", {})[name] = f"{type(e).__name__}: {e}"
        save(out, "vllm_measure.json", results)


# --- train ---------------------------------------------------------------------------------------------

VLLM_OPTIONS = {"gpu_memory_utilization": 0.06, "engine_kwargs": dict(ENGINE, max_model_len=2048)}

#: name -> (tuned example, config overrides as Python source applied to ``config``).
RUNS = {
    "hf_lora": ("tuned_examples/numberline_gigpo.py", ""),
    "vllm_lora": ("tuned_examples/numberline_gigpo.py", f".generation(backend='vllm', backend_options={VLLM_OPTIONS!r})"),
    "vllm_lora_sleep": ("tuned_examples/numberline_gigpo.py",
                        f".generation(backend='vllm', backend_options={dict(VLLM_OPTIONS, sleep_between_rollouts=True)!r})"),
    "vllm_full": ("tuned_examples/numberline_gigpo.py",
                  f".generation(backend='vllm', backend_options={dict(VLLM_OPTIONS, weight_sync='cuda_ipc')!r})"
                  ".llm(model={**config.llm_model, 'lora': None}).training(lr=1e-5)"),
    "vllm_sokoban": ("benchmarks/learning.py:sokoban",
                     f".generation(backend='vllm', backend_options={VLLM_OPTIONS!r})"),
    "vllm_tictactoe": ("tuned_examples/multiagent_tictactoe_grpo.py",
                       f".generation(backend='vllm', backend_options={VLLM_OPTIONS!r})"),
}
DEFAULT_RUNS = ["hf_lora:0", "vllm_lora:0", "hf_lora:1", "vllm_lora:1", "vllm_full:0", "vllm_lora_sleep:0",
                "vllm_sokoban:0", "vllm_tictactoe:0"]


def wrapper_source(name: str, seed: int) -> str:
    example, overrides = RUNS[name]
    lines = ["from pathlib import Path", "from rllib_llm.run.cli import load_tuned_example"]
    if example.startswith("benchmarks/learning.py:"):  # Sokoban: the main job's recipe on text Sokoban
        lines += ["from benchmarks.learning import sokoban",
                  f"config, stop = load_tuned_example(Path({str(ROOT / 'tuned_examples/numberline_gigpo.py')!r}))",
                  "config = config.copy(copy_frozen=False)", "config = sokoban(config)"]
    else:
        lines.append(f"config, stop = load_tuned_example(Path({str(ROOT / example)!r}))")
    sizes = ".group_rollouts(num_groups=8, group_size=4)" if "tictactoe" not in name else ""
    lines.append(f"config = config.debugging(seed={seed}).learners(num_gpus_per_learner=1)"
                 f".env_runners(num_gpus_per_env_runner=1){sizes}")
    lines.append("config = config.llm(model={**config.llm_model, 'inference_dtype': 'bfloat16'})")
    if overrides:
        lines.append(f"config = config{overrides}")
    return "\n".join(lines) + "\n"


def start_after(previous: Path | None) -> str:
    """Shell that waits until the previous vLLM run has its engine up (its first progress row, or it ended):
    engines that start together on one card fail to size their KV cache (notes/vllm.md)."""
    if previous is None:
        return ""
    return (f"while [ ! -s {previous}/progress.jsonl ] && [ ! -e {previous}.ended ]; do sleep 5; done; ")


def train(runs: list[str], budget_s: float, iterations: int, detach: bool, stagger_s: float) -> None:
    """The runs, one process each; each vLLM run starts once the previous one's engine is up, the ``hf``
    ones ``stagger_s`` apart."""
    folder = WORK / "train"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    cmds, previous_engine = [], None
    for i, spec in enumerate(runs):
        name, seed = spec.split(":")
        tag = f"{name}_s{seed}"
        wrapper = folder / f"{tag}.py"
        wrapper.write_text(wrapper_source(name, int(seed)))
        vllm = "backend='vllm'" in RUNS[name][1]
        wait = start_after(previous_engine) if vllm else f"sleep {i * stagger_s:.0f}; "
        cmds.append(f"{wait}timeout {budget_s + 400:.0f} python3 -m rllib_llm.run.cli train "
                    f"{wrapper} --output {folder / tag} --iterations {iterations} --time-budget-s {budget_s:.0f} "
                    f"--eval-seeds 64 --no-tracking --trajectories-per-iter 1 > {folder / tag}.log 2>&1; "
                    f"touch {folder / tag}.ended")
        if vllm:
            previous_engine = folder / tag
    script = folder / "runs.sh"
    script.write_text("".join(f"( {cmd} ) &\n" for cmd in cmds) + f"wait\ntouch {folder}/done\n")
    log("starting", len(cmds), "runs in", folder)
    if detach:
        with open(folder / "runs.log", "w") as out:
            subprocess.Popen(["bash", str(script)], cwd=ROOT, start_new_session=True, stdin=subprocess.DEVNULL,
                             stdout=out, stderr=subprocess.STDOUT)
        return
    subprocess.run(["bash", str(script)], cwd=ROOT, check=False)


# --- report --------------------------------------------------------------------------------------------


def read_run(folder: Path) -> dict[str, Any]:
    """One training run's curve (progress.jsonl) and before/after evaluation (summary.json)."""
    progress = []
    if (folder / "progress.jsonl").is_file():
        for line in (folder / "progress.jsonl").read_text().splitlines():
            try:
                progress.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    summary = json.loads((folder / "summary.json").read_text()) if (folder / "summary.json").is_file() else {}
    return {"progress": progress, "summary": summary}


def pick(row: dict, *names: str) -> Any:
    """The first of ``names`` found in a flat or nested (``a/b``) progress row."""
    for name in names:
        node: Any = row
        for part in name.split("/"):
            node = node.get(part) if isinstance(node, dict) else None
        if node is not None:
            return node
    return None


def report(out: Path, wait_s: float) -> None:
    folder = WORK / "train"
    deadline = time.monotonic() + wait_s
    while folder.is_dir() and not (folder / "done").is_file() and time.monotonic() < deadline:
        time.sleep(5)
    runs = {}
    for log_file in sorted(folder.glob("*.log")):
        tag = log_file.stem
        if tag == "runs":
            continue
        run = read_run(folder / tag)
        run["log_tail"] = log_file.read_text(errors="replace").splitlines()[-25:]
        runs[tag] = run
    measured = json.loads((out / "vllm_measure.json").read_text()) if (out / "vllm_measure.json").is_file() else {}
    gpu = subprocess.run("nvidia-smi --query-gpu=name --format=csv,noheader", shell=True, capture_output=True,
                         text=True).stdout.strip() or "no GPU"
    save(out, "vllm_train.json", {"finished": (folder / "done").is_file(), "runs": runs,
                                  "meta": {"gpu": gpu, "date": time.strftime("%Y-%m-%d")}})
    log("runs:", {t: (len(r["progress"]), r["summary"].get("eval_after", r["summary"].get("after"))) for t, r in runs.items()})
    log("measured keys:", list(measured))


def summarize(raw: Path, output: Path) -> dict[str, Any]:
    """``vllm_h200.{json,md}`` from the raw files the GPU steps wrote (``benchmarks/results/vllm_h200_raw``):
    ``measure_135m.json``, ``measure_1p5b.json`` (``measure``), ``train_*.json`` (``report``); runs locally."""
    measured = {name: json.loads((raw / f"measure_{name}.json").read_text()) for name in ("135m", "1p5b", "lora")
                if (raw / f"measure_{name}.json").is_file()}
    small = measured.get("135m", {}).get("smollm2_135m", {})
    big = measured.get("1p5b", {}).get("qwen2_5_1_5b_shape", {})
    runs: dict[str, Any] = {}
    batches: dict[str, dict] = {}  # train_*.json -> its meta (card, date), where the report recorded one
    for file in sorted(raw.glob("train_*.json")):
        data = json.loads(file.read_text())
        if data.get("meta"):
            batches[file.stem] = data["meta"]
        for tag, run in data["runs"].items():
            progress = run["progress"]
            causes = [line.strip() for line in run["log_tail"] if "ValueError:" in line or "Exception:" in line]
            error = (causes or [line.strip() for line in run["log_tail"] if "Error" in line] or [None])[-1]
            runs[f"{file.stem}/{tag}"] = {
                "iterations": len(progress),
                "eval_before": (run["summary"].get("before") or {}).get("success_rate"),
                "eval_after": (run["summary"].get("after") or {}).get("success_rate"),
                "train_success": [row.get("success") for row in progress],
                "s_per_iter": sum(row.get("time_s", 0.0) for row in progress) / len(progress) if progress else None,
                "error": None if run["summary"].get("after") else error,  # the run died: its last error line
            }
    rollout = rollout_files(raw)
    lora = measured.get("lora", {})
    summary = {"meta": measured.get("135m", {}).get("meta"), "smollm2_135m": small, "qwen2_5_1_5b_shape": big,
               "lora_swaps": {k: lora[k] for k in ("smollm2_135m", "qwen2_5_1_5b_shape") if k in lora},
               "runs": runs,
               "rollout_throughput": {key: rollout_rows(pair) for key, pair in rollout.items()}}
    output.with_suffix(".json").write_text(json.dumps(summary, indent=1))

    def sync_row(name: str, data: dict) -> str:
        times = data.get("sync_s", {})
        pickle, ipc = min(times.get("pickle", [float("nan")])), min(times.get("cuda_ipc", [float("nan")]))
        return (f"| {name} | {data.get('parameters', 0) / 1e6:.0f}M | {', '.join(f'{t:.2f}' for t in times.get('pickle', []))} "
                f"| {', '.join(f'{t:.3f}' for t in times.get('cuda_ipc', []))} | {pickle / ipc:.0f}x |")

    lines = [
        "# vLLM-backed EnvRunners on the lent GPU (issue 23)",
        "",
        f"Generated by `python benchmarks/vllm_gpu.py summarize` from `benchmarks/results/vllm_h200_raw/` (the "
        f"steps `measure`, `train`, `report` of the same script, run on the device). Card: "
        f"{(summary['meta'] or {}).get('gpu')} (an H100 came, not the H200 the file is named after); vLLM "
        f"{(summary['meta'] or {}).get('vllm')}, torch {(summary['meta'] or {}).get('torch')}; "
        f"{(summary['meta'] or {}).get('date')}.",
        "",
        "## Full-weight sync into the engine (`VLLMBackend.update_weights`, seconds per sync)",
        "",
        "| model | parameters | pickled CPU copies (`apply_model`) | CUDA IPC handles (`collective_rpc`) | ratio (best) |",
        "|---|---:|---|---|---:|",
        sync_row("SmolLM2-135M-Instruct (embedded), bf16", small),
        sync_row("Qwen2.5-1.5B shape (random), bf16", big),
        "",
        "## Colocation: engine and Learner on one GPU (1.5B shape: fp32 Learner + AdamW, 16 x 512 tokens)",
        "",
        "| case | engine + other (GiB) | Learner peak (GiB) | device peak (GiB) | update (s) | wake + sync (s) | next rollout (s) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in big.get("colocation", []):
        lines.append(f"| {row['case']} | {row.get('engine_and_other_gib', float('nan')):.1f} | "
                     f"{row.get('learner_process_peak_reserved_gib', float('nan')):.1f} | "
                     f"{row.get('device_peak_gib', float('nan')):.1f} | {row.get('update_s', float('nan')):.2f} | "
                     f"{row.get('wake_and_sync_s', float('nan')):.3f} | {row.get('next_rollout_s', float('nan')):.2f} |")
    if summary["lora_swaps"]:
        meta = lora.get("meta", {})
        lines += ["", f"## LoRA hot-swap (the adapter saved, a new `LoRARequest`; {meta.get('gpu')}, {meta.get('date')})", "",
                  "Per sync: `update_weights`, and the first generate after it minus a second one on the same 64 prompts "
                  "(vLLM loads the adapter on first use); the base is never re-exported.", "",
                  "| model | adapter parameters | update_weights (s) | swap, sync + first rollout's extra (s) |",
                  "|---|---:|---|---|"]
        for key, label in (("smollm2_135m", "SmolLM2-135M-Instruct"), ("qwen2_5_1_5b_shape", "Qwen2.5-1.5B shape")):
            rows = summary["lora_swaps"].get(key, {}).get("lora_swaps", [])
            if rows:
                syncs = ", ".join(f"{r['sync_s']:.3f}" for r in rows)
                swaps = ", ".join(f"{r['swap_s']:.3f}" for r in rows)
                params = summary["lora_swaps"][key].get("adapter_parameters", 0) / 1e6
                lines.append(f"| {label} | {params:.1f}M | {syncs} | {swaps} |")
    lines += [
        "",
        "## Log-prob agreement, sampler (vLLM, bf16) vs Learner (fp32 forward, `token_logprobs`), embedded model",
        "",
        "| weights | T | tokens | max abs | mean abs | ratio mean | ratio std | ratio min | ratio max | outside 1 +- 0.2 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, row in [("as loaded", r) for r in small.get("logprobs", [])] + (
            [("after a CUDA IPC sync of perturbed weights", small["after_ipc_sync_logprobs"])]
            if "after_ipc_sync_logprobs" in small else []):
        lines.append(f"| {label} | {row['temperature']} | {row['tokens']} | {row['max_abs_diff']:.3f} | "
                     f"{row['mean_abs_diff']:.4f} | {row['ratio_mean']:.4f} | {row['ratio_std']:.4f} | "
                     f"{row['ratio_min']:.3f} | {row['ratio_max']:.3f} | {row['ratio_outside_clip_0.2']:.4f} |")
    lines += [
        "",
        "## Training through `rllib-llm train` (the main job at 8 groups x 4; greedy eval on 64 held-out seeds)",
        "",
        "| batch / run | iterations | eval before | eval after | train success, iterations 1-5 / last 5 (mean) | s/iter | failure |",
        "|---|---:|---:|---:|---|---:|---|",
    ]
    for tag, run in runs.items():
        curve = [x for x in run["train_success"] if x is not None]
        first, last = (sum(curve[:5]) / len(curve[:5]), sum(curve[-5:]) / len(curve[-5:])) if curve else (None, None)
        curve_text = f"{first:.2f} / {last:.2f}" if curve else "-"
        fmt = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
        speed = "-" if run["s_per_iter"] is None else f"{run['s_per_iter']:.1f}"
        lines.append(f"| {tag} | {run['iterations']} | {fmt(run['eval_before'])} | {fmt(run['eval_after'])} | "
                     f"{curve_text} | {speed} | {(run['error'] or '')[:120]} |")
    lines += [""] + [f"`{stem}`: {meta.get('gpu')}, {meta.get('date')}" + (f"; {meta['note']}" if meta.get("note") else "")
                     + "." for stem, meta in batches.items()] if batches else []
    if plot_curves(runs, output.with_suffix(".png")):
        lines += ["", f"Curves: `{output.with_suffix('.png').name}` (the main job's runs, trained success per iteration, "
                  "moving mean of 5; one panel per seed, `hf` and `vllm` side by side)."]
    lines += rollout_lines(rollout, summary["rollout_throughput"])
    output.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return summary


#: The training runs that are the main job with one backend or the other (the curves' panels).
MAIN_JOB_RUNS = ("hf_lora", "vllm_lora", "vllm_full")


def moving_mean(values: list[float], window: int = 5) -> list[float]:
    return [sum(values[max(0, i - window + 1) : i + 1]) / len(values[max(0, i - window + 1) : i + 1])
            for i in range(len(values))]


def plot_curves(runs: dict[str, dict[str, Any]], path: Path) -> bool:
    """The main job's hf and vllm runs (``<batch>/<run>_s<seed>``), one panel per seed; False if none."""
    panels: dict[str, list[dict[str, Any]]] = {}
    for tag, run in runs.items():
        name, _, seed = tag.split("/")[-1].rpartition("_s")
        curve = [x for x in run["train_success"] if x is not None]
        if name in MAIN_JOB_RUNS and curve:
            panels.setdefault(seed, []).append({"label": tag, "x": list(range(1, len(curve) + 1)), "y": moving_mean(curve)})
    if not panels:
        return False
    from benchmarks._common import save_plot

    save_plot(path, [{"xlabel": f"iteration (seed {seed})", "ylabel": "trained success (MA5)", "lines": lines}
                     for seed, lines in sorted(panels.items())],
              title="The main job through rllib-llm train, hf vs vllm generation")
    return True


#: ``rollout_{backend}{suffix}.json`` in the raw folder: which model's EnvRunner it timed.
ROLLOUT_MODELS = {"": ("smollm2_135m", "SmolLM2-135M-Instruct (embedded)"),
                  "_1p5b": ("qwen2_5_1_5b_shape", "Qwen2.5-1.5B shape (random weights, `vllm_gpu.py qwen15`)")}


def rollout_files(raw: Path) -> dict[str, dict[str, dict]]:
    """model key -> backend -> the ``rollout_throughput.py`` results file of that pair."""
    found: dict[str, dict[str, dict]] = {}
    for suffix, (key, _) in ROLLOUT_MODELS.items():
        for backend in ("hf", "vllm"):
            file = raw / f"rollout_{backend}{suffix}.json"
            if file.is_file():
                found.setdefault(key, {})[backend] = json.loads(file.read_text())
    return found


def rollout_rows(rollout: dict[str, dict]) -> list[dict[str, Any]]:
    """One row per env count: both backends' env steps/s, their generate-only tokens/s and the EnvRunner's
    share of it (``runner_vs_generate``), the bare engine's tokens/s on the vllm run's prompts and the vllm
    EnvRunner against it (``runner_vs_raw_vllm``), vllm / hf, and hf's generate calls against the bare engine."""
    keys = ("env_steps_per_s", "tokens_per_s", "generate_tokens_per_s", "runner_vs_generate",
            "raw_vllm_tokens_per_s", "runner_vs_raw_vllm")
    by_envs: dict[int, dict[str, Any]] = {}
    for backend, data in rollout.items():
        for row in data["rows"]:
            if row["mode"] == "batched":
                by_envs.setdefault(row["envs"], {"envs": row["envs"]})[backend] = {k: row[k] for k in keys if k in row}
    rows = [by_envs[envs] for envs in sorted(by_envs)]
    for row in rows:
        if "hf" in row and "vllm" in row:
            row["vllm_over_hf"] = row["vllm"]["env_steps_per_s"] / row["hf"]["env_steps_per_s"]
            raw = row["vllm"].get("raw_vllm_tokens_per_s")
            if raw:
                row["hf_generate_over_raw_vllm"] = row["hf"]["generate_tokens_per_s"] / raw
    return rows


def rollout_lines(files: dict[str, dict[str, dict]], tables: dict[str, list[dict[str, Any]]]) -> list[str]:
    if not tables:
        return []
    lines = [
        "",
        "## Rollout throughput with the whole EnvRunner (`benchmarks/rollout_throughput.py`, one rollout per size)",
        "",
        "The main job's EnvRunner, fixed-length responses, module and engine in bf16, each backend in its own "
        "process on the same warm card. Runner share: the generate calls' time / the whole `sample()` (1.0: prompt "
        "building, parsing and env steps cost nothing). Raw vLLM: the vllm run's prompts replayed through the bare "
        "`vllm.LLM.generate` (one `SamplingParams` a batch, no per-request seeds or log-probs, outputs not parsed); "
        "vllm runner / raw: the whole EnvRunner's time against it, issue 23's 'best backend >= 0.9x of raw vLLM "
        "generate'; hf gen / raw: hf's generate calls against the bare engine on the other process's prompts "
        "(same seeds and lengths, not the same sampled tokens).",
    ]
    for key, title in ROLLOUT_MODELS.values():
        if key not in tables:
            continue
        any_run = next(iter(files[key].values()))
        size, machine = any_run["summary"], any_run["machine"]
        lines += [
            "",
            f"### {title}: {machine.get('gpu')}, {machine['date'][:10]}, {size['steps']} env steps x "
            f"{size['new_tokens']} new tokens per env",
            "",
            "| envs | hf env steps/s | vllm env steps/s | vllm / hf | hf generate tok/s | vllm generate tok/s | "
            "raw vLLM tok/s | hf runner share | vllm runner share | vllm runner / raw | hf gen / raw |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        cell = lambda d, k, f: format(d[k], f) if d.get(k) is not None else "-"  # noqa: E731
        for row in tables[key]:
            hf, vllm = row.get("hf", {}), row.get("vllm", {})
            lines.append(
                f"| {row['envs']} | {cell(hf, 'env_steps_per_s', '.0f')} | {cell(vllm, 'env_steps_per_s', '.0f')} | "
                f"{cell(row, 'vllm_over_hf', '.2f')} | {cell(hf, 'generate_tokens_per_s', ',.0f')} | "
                f"{cell(vllm, 'generate_tokens_per_s', ',.0f')} | {cell(vllm, 'raw_vllm_tokens_per_s', ',.0f')} | "
                f"{cell(hf, 'runner_vs_generate', '.2f')} | {cell(vllm, 'runner_vs_generate', '.2f')} | "
                f"{cell(vllm, 'runner_vs_raw_vllm', '.2f')} | {cell(row, 'hf_generate_over_raw_vllm', '.2f')} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("step", choices=("measure", "train", "report", "summarize", "qwen15"))
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/vllm_out")))
    parser.add_argument("--sections", nargs="+", default=["logprobs", "sync135", "big"],
                        choices=("logprobs", "sync135", "big", "lora", "lora_135m", "lora_1p5b"))
    parser.add_argument("--tokenizer", default=MODEL,
                        help="measure (lora) and qwen15: the tokenizer of the prompts and of the 1.5B-shaped model "
                             "(default the embedded model's; a folder saved with save_pretrained serves where its "
                             "GGUF is not staged)")
    parser.add_argument("--runs", nargs="+", default=DEFAULT_RUNS, help="train: name:seed of RUNS")
    parser.add_argument("--budget-s", type=float, default=360.0, help="train: each run's training time")
    parser.add_argument("--iterations", type=int, default=200, help="train: at most")
    parser.add_argument("--stagger-s", type=float, default=20.0, help="train: start the hf runs this far apart")
    parser.add_argument("--detach", action="store_true", help="train: start the runs and return")
    parser.add_argument("--wait-s", type=float, default=540.0, help="report: wait for the training runs")
    args = parser.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if args.step == "measure":
        measure(args.out, args.sections, args.tokenizer)
    elif args.step == "train":
        train(args.runs, args.budget_s, args.iterations, args.detach, args.stagger_s)
    elif args.step == "qwen15":  # the folder for rollout_throughput.py --model (issue 23's 1.5B throughput)
        from rllib_llm.core.models import load_tokenizer

        qwen15_model(load_tokenizer(args.tokenizer))
        print(WORK / "qwen15")
    elif args.step == "report":
        report(args.out, args.wait_s)
    else:
        summarize(ROOT / "benchmarks/results/vllm_h200_raw", ROOT / "benchmarks/results/vllm_h200")


if __name__ == "__main__":
    main()

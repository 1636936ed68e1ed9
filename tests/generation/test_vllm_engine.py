"""The vllm backend on a real vLLM engine (GPU with vLLM installed; skipped elsewhere): CUDA IPC weight sync
takes effect, sleep mode frees the KV cache and wakes for the next rollout, LoRA adapters take effect."""

from __future__ import annotations

import copy
import importlib.util

import pytest
import torch

from rllib_llm.core.models import EMBEDDED_MODEL, apply_lora, load_causal_lm, load_tokenizer
from rllib_llm.generation import SamplingParams, make_backend

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="needs vLLM"),
]

ENGINE = {"attention_backend": "FLASH_ATTN", "max_model_len": 512}
PARAMS = SamplingParams(temperature=1.0, max_new_tokens=16, seed=0, stop=[])


@pytest.fixture(scope="module")
def embedded():
    tokenizer = load_tokenizer(EMBEDDED_MODEL)
    prompts = [tokenizer(f"Count from {i}:", add_special_tokens=False)["input_ids"] for i in range(8)]
    return tokenizer, prompts


def fp32_logprobs(model, prompts, outputs):
    from rllib_llm.token_forward import one_response_logprobs

    model32 = copy.deepcopy(model).float()
    with torch.no_grad():
        return torch.cat([one_response_logprobs(model32, prompt, list(out.token_ids))
                          for prompt, out in zip(prompts, outputs, strict=True)])


def max_gap(model, prompts, outputs) -> float:
    sampled = torch.tensor([lp for out in outputs for lp in out.logprobs], device="cuda")
    return float((sampled - fp32_logprobs(model, prompts, outputs)).abs().max())


def shutdown(backend) -> None:
    backend.llm.llm_engine.engine_core.shutdown()


def test_cuda_ipc_sync_and_sleep_mode_on_a_real_engine(embedded):
    tokenizer, prompts = embedded
    model = load_causal_lm(EMBEDDED_MODEL, tokenizer).to("cuda", torch.bfloat16).eval()
    backend = make_backend("vllm", model=model, tokenizer=tokenizer, gpu_memory_utilization=0.1,
                           engine_kwargs=ENGINE, sleep_between_rollouts=True)
    try:
        assert max_gap(model, prompts, backend.generate(prompts, PARAMS)) < 0.5  # bf16 engine vs fp32
        with torch.no_grad():
            for p in model.parameters():
                p.mul_(1.05)
        stale = max_gap(model, prompts, backend.generate(prompts, PARAMS))  # the engine has the old weights
        used_awake = torch.cuda.mem_get_info()[1] - torch.cuda.mem_get_info()[0]
        backend.release_memory()
        used_asleep = torch.cuda.mem_get_info()[1] - torch.cuda.mem_get_info()[0]
        assert used_asleep < used_awake - 2**30  # the KV cache (>= 1 GiB at 0.1 of the card) went back
        backend.update_weights({})
        assert backend.last_sync == "cuda_ipc"
        synced = max_gap(model, prompts, backend.generate(prompts, PARAMS))
        assert synced < 0.5 and synced < stale / 4, (synced, stale)
    finally:
        shutdown(backend)


def test_lora_adapters_take_effect_without_re_exporting_the_base(embedded):
    tokenizer, prompts = embedded
    model = apply_lora(load_causal_lm(EMBEDDED_MODEL, tokenizer), {"r": 8, "lora_alpha": 16})
    model = model.to("cuda", torch.bfloat16).eval()
    backend = make_backend("vllm", model=model, tokenizer=tokenizer, gpu_memory_utilization=0.1, engine_kwargs=ENGINE)
    try:
        exported = backend.llm.llm_engine.vllm_config.model_config.model
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "lora_B" in name:  # 0.02 moved the log-probs by only ~3x bf16's own max error (2026-12-06)
                    p.normal_(0.0, 0.05)
        stale = max_gap(model, prompts, backend.generate(prompts, PARAMS))  # adapters not sent yet
        backend.update_weights({})
        assert backend.last_sync == "lora"
        synced = max_gap(model, prompts, backend.generate(prompts, PARAMS))
        assert synced < 0.5 and synced < stale / 4, (synced, stale)
        assert backend.llm.llm_engine.vllm_config.model_config.model == exported
    finally:
        shutdown(backend)

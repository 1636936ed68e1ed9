"""Model families through LLMRLModule + the hf backend, on tiny random models built from each family's config
class: generation works, the Learner's log-probs equal the generator's, and LoRA wraps the model."""

from __future__ import annotations

import pytest
import torch

from rllib_llm.core.rl_module import LLMRLModule
from tests.model_parity import PREFIX, assert_learner_matches_generator

LLAMA3_ROPE = {
    "rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0, "low_freq_factor": 1.0,
    "high_freq_factor": 4.0, "original_max_position_embeddings": 8192,
}  # fmt: skip
#: family -> (tiny_config, model class). SmolLM2 and LLaMA 3.2 are Llamas (3.2: llama3 RoPE scaling);
#: Qwen2.5 is the qwen2 architecture (q/k/v biases); Qwen3 adds q/k RMSNorm.
FAMILIES = {
    "smollm2": ({"model_type": "llama"}, "LlamaForCausalLM"),
    "llama3.2": ({"model_type": "llama", "rope_parameters": LLAMA3_ROPE}, "LlamaForCausalLM"),
    "qwen2.5": ({"model_type": "qwen2"}, "Qwen2ForCausalLM"),
    "qwen3": ({"model_type": "qwen3"}, "Qwen3ForCausalLM"),
}


def build(tiny_config: dict, **model: object) -> LLMRLModule:
    spec = {"name_or_path": "tiny-random-llama", "tiny_config": tiny_config, **model}
    return LLMRLModule(model_config={"model": spec, "temperature": 0.7})


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_family_generates_and_learner_logprobs_match(family, device):
    tiny_config, class_name = FAMILIES[family]
    module = build(tiny_config).to(device)
    assert type(module.model).__name__ == class_name
    if family == "llama3.2":
        assert module.model.config.rope_parameters["rope_type"] == "llama3"
    assert_learner_matches_generator(module)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_family_lora_wraps_and_trains_only_adapters(family):
    module = build(FAMILIES[family][0], lora={"r": 4, "lora_alpha": 8, "target_modules": "all-linear"})
    trainable = {n for n, p in module.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    ids = torch.tensor([PREFIX + [70, 71, 72]])
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "response_mask": torch.ones((1, 3))}
    module.forward_train(batch)["logp"].sum().backward()
    with_grad = {n for n, p in module.named_parameters() if p.grad is not None and p.grad.abs().sum() > 0}
    assert with_grad and with_grad <= trainable


def test_identical_prompts_keep_a_token_after_the_shared_prefix():
    """All rows the same prompt: the shared prefix may not swallow the token whose logit scores the first
    response token (the Learner's forward used to fail on such batches)."""
    assert_learner_matches_generator(build({}), prompts=[PREFIX, PREFIX, PREFIX])

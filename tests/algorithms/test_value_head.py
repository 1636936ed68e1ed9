"""The critic head of LLMRLModule: what its values are, where they are trained, and what is synced."""

from __future__ import annotations

import torch

from rllib_llm.columns import ENTROPY, LOGP, VALUES
from rllib_llm.core.rl_module import LLMRLModule
from tests.algorithms.conftest import tiny_module


def batch(prompt_len: int = 5, response_len: int = 3) -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    ids = torch.randint(3, 200, (2, prompt_len + response_len))
    mask = torch.ones_like(ids)
    mask[1, :2] = 0  # row 1's prompt is left-padded by 2
    return {"input_ids": ids, "attention_mask": mask, "response_mask": torch.ones(2, response_len)}


def random_head(module: LLMRLModule) -> LLMRLModule:
    with torch.no_grad():
        module.value_head.weight.normal_()
        module.value_head.bias.fill_(0.5)
    return module


def test_values_are_the_head_on_the_last_hidden_state_before_each_response_token():
    module = random_head(tiny_module(value_head=True))
    b = batch()
    out = module.forward_train(b)
    assert set(out) == {LOGP, ENTROPY, VALUES} and out[VALUES].shape == (2, 3)
    from rllib_llm.token_forward import position_ids_from_mask

    hidden = module.model(
        input_ids=b["input_ids"], attention_mask=b["attention_mask"],
        position_ids=position_ids_from_mask(b["attention_mask"]), output_hidden_states=True,
    ).hidden_states[-1]
    # Position 4 is the last prompt token (P = 5): values[:, 0] is the value of the step's state.
    expected = module.value_head(hidden[:, 4:7]).squeeze(-1)
    torch.testing.assert_close(out[VALUES], expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(module.values(b), out[VALUES].detach())


def test_value_head_starts_at_zero_and_is_absent_without_the_flag():
    assert torch.all(tiny_module(value_head=True).forward_train(batch())[VALUES] == 0)
    plain = tiny_module()
    assert VALUES not in plain.forward_train(batch())


def test_value_gradient_reaches_the_trunk_unless_detached():
    for detach, trunk_moves in ((False, True), (True, False)):
        module = random_head(tiny_module(value_head=True, value_head_detach=detach))
        module.forward_train(batch())[VALUES].sum().backward()
        embed = module.model.get_input_embeddings().weight.grad
        assert module.value_head.weight.grad is not None
        assert (embed is not None and embed.abs().sum() > 0) == trunk_moves


def test_env_runner_modules_drop_the_value_head_and_accept_the_synced_state():
    learner = random_head(tiny_module(value_head=True))
    synced = learner.get_state(inference_only=True)
    assert not any(k.startswith("value_head") for k in synced)
    assert {"value_head.weight", "value_head.bias"} <= set(learner.get_state())
    runner = LLMRLModule(
        model_config={"model": {"name_or_path": "tiny-random-llama"}, "value_head": True}, inference_only=True
    )
    assert getattr(runner, "value_head", None) is None
    runner.set_state(synced)


def test_value_head_trains_with_lora_but_is_not_synced():
    module = tiny_module(value_head=True, model={"name_or_path": "tiny-random-llama", "lora": {"r": 4, "lora_alpha": 8}})
    trainable = {n for n, p in module.named_parameters() if p.requires_grad}
    assert {"value_head.weight", "value_head.bias"} <= trainable
    assert set(module.get_state(inference_only=True)) == {n for n in trainable if "lora_" in n}

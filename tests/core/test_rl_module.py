"""The LLM RLModule: response log-probs for the Learner, LoRA, and weight state for syncing."""

import numpy as np
import pytest
import torch

from rllib_llm.algorithms.learner_connectors import pad_token_batch
from rllib_llm.columns import ACTION_LOGP, PROMPT, RESPONSE
from rllib_llm.core.rl_module import LLMRLModule
from rllib_llm.generation import SamplingParams, make_backend
from rllib_llm.token_forward import one_response_logprobs, response_logprobs, shares_prefix


def build(**model_config):
    return LLMRLModule(model_config={"model": {"name_or_path": "tiny-random-llama"}, **model_config})


def test_response_logprobs_match_a_manual_forward_without_padding():
    module = build()
    prompt, response = [5, 6, 7, 8], [9, 10, 11]
    ids = torch.tensor([prompt + response])
    logp, _ = response_logprobs(module.model, ids, torch.ones_like(ids), len(response))
    logits = module.model(input_ids=ids).logits[0]
    manual = torch.log_softmax(logits, -1)[torch.arange(3, 6), torch.tensor(response)]
    torch.testing.assert_close(logp[0], manual, rtol=1e-5, atol=1e-5)


def test_one_response_logprobs_is_the_learner_row_at_a_temperature():
    module = build()
    prompt, response = [5, 6, 7, 8], [9, 10, 11]
    logits = module.model(input_ids=torch.tensor([prompt + response])).logits[0] / 0.7
    manual = torch.log_softmax(logits, -1)[torch.arange(3, 6), torch.tensor(response)]
    torch.testing.assert_close(one_response_logprobs(module.model, prompt, response, 0.7), manual, rtol=1e-5, atol=1e-5)


def test_learner_logprobs_match_generation_logprobs_for_unchanged_policy():
    """The EnvRunner's old log-probs and the Learner's recomputation agree (left/right padding included)."""
    module = build(temperature=0.7)
    backend = make_backend("hf", model=module.model, tokenizer=module.tokenizer)
    prompts = [[40, 41, 42, 43, 44, 45], [50, 51], [60, 61, 62]]
    outs = backend.generate(prompts, SamplingParams(temperature=0.7, max_new_tokens=5, stop=[], seed=1))
    steps = {PROMPT: prompts, RESPONSE: [o.token_ids for o in outs], ACTION_LOGP: [o.logprobs for o in outs]}
    batch = {k: torch.as_tensor(v) for k, v in pad_token_batch(steps, module.tokenizer.pad_token_id).items()}
    with torch.no_grad():
        logp = module.forward_train(batch)["logp"]
    mask = batch["response_mask"].bool()
    torch.testing.assert_close(logp[mask], batch["action_logp"][mask], rtol=1e-4, atol=1e-4)


def test_lora_trains_syncs_and_checkpoints_only_adapter_weights():
    lora = {"name_or_path": "tiny-random-llama", "lora": {"r": 4, "lora_alpha": 8}}
    module = build(model=lora)
    trainable = {n for n, p in module.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    synced = module.get_state(inference_only=True)
    assert set(synced) == trainable
    assert set(module.get_state()) == trainable  # what a checkpoint holds: the base is rebuilt from its source
    assert len(module.get_state(frozen_weights=True)) > len(synced)
    other = build(model=lora)
    other.set_state({k: v + 1.0 for k, v in synced.items()})
    name = next(iter(trainable))
    np.testing.assert_allclose(other.get_state()[name], synced[name] + 1.0)


def test_weight_sync_copies_only_the_adapters_to_numpy(monkeypatch):
    """RLlib's get_state copies every weight to numpy; the frozen base must not travel to the host at a sync."""
    import rllib_llm.core.rl_module as rl_module

    module = build(model={"name_or_path": "tiny-random-llama", "lora": {"r": 4, "lora_alpha": 8}}, value_head=True)
    converted: list[str] = []
    real = rl_module.convert_to_numpy
    monkeypatch.setattr(rl_module, "convert_to_numpy", lambda state: converted.extend(state) or real(state))
    trainable = {n for n, p in module.named_parameters() if p.requires_grad}
    assert set(module.get_state(inference_only=True)) == {n for n in trainable if not n.startswith("value_head.")}
    assert set(converted) == {n for n in trainable if not n.startswith("value_head.")}
    assert {"value_head.weight", "value_head.bias"} <= set(module.get_state())  # the Learner's checkpoint keeps it


def test_bfloat16_weights_sync_exactly():
    """numpy has no bfloat16 (RLlib's convert_to_numpy raises): a bf16 EnvRunner module's state (the local
    runner's deferred engine syncs from it) travels as float32 and loads back bit for bit."""
    module = build(model={"name_or_path": "tiny-random-llama", "dtype": "bfloat16"})
    state = module.get_state(inference_only=True)
    assert {v.dtype for v in state.values()} == {np.dtype("float32")}
    other = build(model={"name_or_path": "tiny-random-llama", "dtype": "bfloat16"})
    with torch.no_grad():
        for p in other.parameters():
            p.zero_()
    other.set_state(state)
    for (name, a), b in zip(module.state_dict().items(), other.state_dict().values(), strict=True):
        assert b.dtype == torch.bfloat16 and torch.equal(a, b), name


def test_adapter_only_state_restores_the_same_policy():
    lora = {"name_or_path": "tiny-random-llama", "lora": {"r": 4, "lora_alpha": 8}}
    trained = build(model=lora)
    with torch.no_grad():
        for p in trained.parameters():
            if p.requires_grad:
                p.add_(0.05 * torch.randn_like(p))
    restored = build(model=lora)
    restored.set_state(trained.get_state())
    ids = torch.tensor([[5, 6, 7, 8, 9, 10]])
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "response_mask": torch.ones(1, 3)}
    with torch.no_grad():
        expected = trained.forward_train(batch)["logp"]
        torch.testing.assert_close(restored.forward_train(batch)["logp"], expected)
        assert not torch.allclose(build(model=lora).forward_train(batch)["logp"], expected)


def test_set_state_rejects_weights_of_another_model():
    module = build()
    with pytest.raises(ValueError, match="unexpected keys"):
        module.set_state({"not.a.weight": np.zeros(2)})


def test_reference_logprobs_stay_fixed_while_policy_changes():
    module = build(use_reference=True)
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "response_mask": torch.ones(1, 2)}
    before = module.reference_logprobs(batch)
    with torch.no_grad():
        for p in module.model.parameters():
            p.add_(0.05)
    torch.testing.assert_close(module.reference_logprobs(batch), before)
    assert not torch.allclose(module.forward_train(batch)["logp"], before)


def test_shared_prefix_forward_equals_plain_forward_and_backward():
    """Running the shared prompt prefix once gives the same log-probs and gradients as the plain pass."""
    module = build()
    shared = list(range(40, 70))
    steps = {
        PROMPT: [shared + [5, 6, 7], shared + [8], shared + [9, 10]],
        RESPONSE: [[11, 12], [13, 14, 15], [16]],
        ACTION_LOGP: [[0.0] * 2, [0.0] * 3, [0.0]],
    }
    batch = {k: torch.as_tensor(v) for k, v in pad_token_batch(steps, module.tokenizer.pad_token_id).items()}
    grads = []
    results = []
    for share in (False, True):
        module.model.zero_grad()
        logp, _ = response_logprobs(module.model, batch["input_ids"], batch["attention_mask"], 3, share_prefix=share)
        (logp * batch["response_mask"]).sum().backward()
        results.append(logp.detach())
        grads.append(next(module.model.parameters()).grad.clone())
    mask = batch["response_mask"].bool()
    torch.testing.assert_close(results[0][mask], results[1][mask], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("setting, calls", [(None, 2), (True, 2), (False, 1)])
def test_the_learner_splits_off_the_shared_prefix_as_configured(setting, calls):
    """``shared_prefix_forward`` reaches the module's pass: the prefix once + the rows (2 decoder calls), or one
    plain pass; by default (None) the split on a CPU."""
    module = build(shared_prefix_forward=setting)
    shared = list(range(40, 70))
    steps = {PROMPT: [shared + [5], shared + [8, 9]], RESPONSE: [[11, 12], [13]], ACTION_LOGP: [[0.0] * 2, [0.0]]}
    batch = {k: torch.as_tensor(v) for k, v in pad_token_batch(steps, module.tokenizer.pad_token_id).items()}
    seen = []
    hook = module.model.get_decoder().register_forward_hook(lambda *_: seen.append(1))
    try:
        module.logprobs(batch)
    finally:
        hook.remove()
    assert len(seen) == calls


def test_the_default_splits_the_shared_prefix_on_a_cpu_only():
    assert shares_prefix(None, torch.device("cpu")) and not shares_prefix(None, torch.device("cuda"))
    assert shares_prefix(True, torch.device("cuda")) and not shares_prefix(False, torch.device("cpu"))


def test_shared_prefix_length():
    from rllib_llm.token_forward import shared_prefix_length

    assert shared_prefix_length([[1, 2, 3], [1, 2, 4], [1, 2]]) == 2
    assert shared_prefix_length([[1], [2]]) == 0
    assert shared_prefix_length([[1, 2]]) == 2


def test_building_a_module_does_not_log_rllibs_rlmoduleconfig_deprecation_notice():
    """RLlib builds a deprecated RLModuleConfig inside every RLModule; its notice would open every run's log."""
    import subprocess
    import sys

    code = (
        "import logging; logging.basicConfig(level=logging.WARNING)\n"
        "from tests.algorithms.conftest import tiny_module\n"
        "tiny_module()\n"
        "print('built')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "built" in done.stdout, done.stderr[-2000:]
    assert "RLModuleConfig" not in done.stderr


def test_sampling_switches_no_module_mode_and_the_learner_switches_only_on_a_change():
    """A mode switch walks every submodule (ms with LoRA): an EnvRunner's module stays in eval mode through
    RLlib's forward_exploration and the hf backend; the Learner's module switches only when the mode changes."""
    from rllib_llm.core.single_agent_env_runner import LLMEnvRunner
    from tests.conftest import tiny_config

    runner = LLMEnvRunner(config=tiny_config().llm(model={"name_or_path": "tiny-random-llama", "lora": {"r": 4}}))
    model = runner.module.model
    assert not runner.module.training and not model.training
    switches = []
    model.train = lambda mode=True: switches.append(mode) or model  # what nn.Module.train calls on each child
    episodes = runner.sample(seeds=[0, 1], group_size=1)
    assert episodes and switches == []
    learner = build()
    learner.model.train = lambda mode=True: switches.append(mode) or learner.model
    learner.train()
    assert switches == []  # already training
    learner.eval()
    assert switches == [False]


def test_chunked_head_logprobs_equal_the_one_pass_log_softmax_with_gradients():
    """Chunks of a few tokens (each recomputed in backward) give the one-pass values and gradients."""
    from rllib_llm.token_forward import logprobs_from_hidden

    torch.manual_seed(0)
    head = torch.nn.Linear(16, 50, bias=False)
    hidden = torch.randn(3, 5, 16, requires_grad=True)
    tokens = torch.randint(0, 50, (3, 5))
    logp_all = torch.log_softmax(head(hidden).float() / 0.7, -1)
    want_logp = logp_all.gather(-1, tokens[..., None]).squeeze(-1)
    want_entropy = -(logp_all.exp() * logp_all).sum(-1)
    (want_logp.sum() + want_entropy.sum()).backward()
    want_grads = hidden.grad.clone(), head.weight.grad.clone()
    hidden.grad, head.weight.grad = None, None
    logp, entropy = logprobs_from_hidden(hidden, head, tokens, 0.7, with_entropy=True, chunk_elements=100)  # 2 tokens
    (logp.sum() + entropy.sum()).backward()
    torch.testing.assert_close(logp, want_logp)
    torch.testing.assert_close(entropy, want_entropy)
    torch.testing.assert_close(hidden.grad, want_grads[0])
    torch.testing.assert_close(head.weight.grad, want_grads[1])


def test_the_learner_never_runs_the_lm_head_on_more_than_one_chunk_of_tokens(monkeypatch):
    """The Learner's pass feeds the head at most LOGITS_CHUNK_ELEMENTS logits at a time, in forward and in
    backward, and still equals the model's own logits (full-vocabulary logits of a whole minibatch took 74 GB
    for a 0.5B Qwen)."""
    import rllib_llm.token_forward as token_forward

    module = build()
    vocab = module.model.get_output_embeddings().weight.shape[0]
    monkeypatch.setattr(token_forward, "LOGITS_CHUNK_ELEMENTS", 3 * vocab)
    prompts, responses = [[5, 6, 7, 8], [9, 10]], [[11, 12, 13, 14], [15, 16, 17, 18]]
    ids = torch.tensor([prompts[0] + responses[0], [0, 0] + prompts[1] + responses[1]])
    mask = torch.tensor([[1] * 8, [0, 0] + [1] * 6])
    rows = []
    hook = module.model.get_output_embeddings().register_forward_hook(lambda _, args, out: rows.append(out.shape[:-1].numel()))
    try:
        logp, entropy = module.logprobs({"input_ids": ids, "attention_mask": mask, "response_mask": torch.ones(2, 4)},
                                        with_entropy=True)  # fmt: skip
        (logp.sum() + entropy.sum()).backward()
    finally:
        hook.remove()
    assert rows and max(rows) <= 3 and sum(rows) >= 2 * 8  # 8 response tokens, forward + recomputed in backward
    with torch.no_grad():
        logits = module.model(input_ids=ids[:1]).logits[0, 3:7]
    torch.testing.assert_close(logp[0].detach(), torch.log_softmax(logits, -1)[torch.arange(4), torch.tensor(responses[0])],
                               rtol=1e-5, atol=1e-5)  # fmt: skip


def test_activation_checkpointing_with_lora_gives_the_adapters_the_plain_gradients():
    """Recomputed activations (``gradient_checkpointing``) must not cut LoRA off its gradients (the reentrant
    checkpoint of older transformers did, the frozen embeddings' output needing no grad)."""
    lora = {"name_or_path": "tiny-random-llama", "lora": {"r": 4, "lora_alpha": 8}}
    grads = []
    for checkpointing in (False, True):
        torch.manual_seed(0)  # the same adapters' initial weights
        module = build(model=lora, gradient_checkpointing=checkpointing)
        module.train()
        ids = torch.tensor([[5, 6, 7, 8, 9, 10], [11, 12, 13, 14, 15, 16]])
        batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "response_mask": torch.ones(2, 3)}
        module.forward_train(batch)["logp"].sum().backward()
        grads.append({n: p.grad for n, p in module.named_parameters() if p.requires_grad})
    assert grads[1] and all(g is not None for g in grads[1].values())
    assert all(g.abs().sum() > 0 for n, g in grads[1].items() if "lora_B" in n)  # lora_A's are 0 while B = 0
    for name, grad in grads[0].items():
        torch.testing.assert_close(grads[1][name], grad, rtol=1e-4, atol=1e-6)

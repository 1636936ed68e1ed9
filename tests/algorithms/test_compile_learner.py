"""``.framework(torch_compile_learner=True)``: the Learner compiles each module's language model (RLlib's own
call compiles nothing for a MultiRLModule), the compiled passes give the eager log-probs and gradients, and
compiling generation on the EnvRunners is refused."""

import math

import pytest
import torch
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.rl_module.torch.torch_compile_config import TorchCompileConfig

from rllib_llm.algorithms.learner_connectors import pad_token_batch
from rllib_llm.columns import ACTION_LOGP, PROMPT, RESPONSE
from rllib_llm.core.rl_module import LLMRLModule
from tests.conftest import tiny_config

#: dynamo's "eager" backend: the graphs are captured (what these tests check), no kernels are generated.
EAGER = TorchCompileConfig(torch_dynamo_backend="eager")


def token_batch(module: LLMRLModule, prompts: list[list[int]], responses: list[list[int]]) -> dict:
    steps = {PROMPT: prompts, RESPONSE: responses, ACTION_LOGP: [[0.0] * len(r) for r in responses]}
    return {k: torch.as_tensor(v) for k, v in pad_token_batch(steps, module.tokenizer.pad_token_id).items()}


def assert_compiled_equals_eager(device: str, compile_config: TorchCompileConfig) -> None:
    torch._dynamo.reset()
    spec = {"model": {"name_or_path": "tiny-random-llama", "lora": {"r": 4}}}
    eager, compiled = LLMRLModule(model_config=spec).to(device), LLMRLModule(model_config=spec).to(device)
    compiled.set_state(eager.get_state(frozen_weights=True))
    assert compiled.compile(compile_config) is compiled and compiled.compile(compile_config) is compiled  # once
    assert compiled.trained_network()._compiled_call_impl is not None
    assert eager.trained_network()._compiled_call_impl is None
    frames = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    for prompts, responses in [([[5, 6, 7], [8, 9]], [[10, 11], [12]]), ([[5, 6, 7, 8, 9, 10]], [[11, 12, 13, 14]])]:
        batch = {k: v.to(device) for k, v in token_batch(eager, prompts, responses).items()}
        outs = []
        for module in (eager, compiled):
            module.model.zero_grad()
            out = module.forward_train(batch)
            (out["logp"] * batch["response_mask"]).sum().backward()
            grad = next(p.grad for p in module.model.parameters() if p.requires_grad)
            outs.append((out["logp"].detach(), out["entropy"].detach(), grad.clone()))
        mask = batch["response_mask"].bool()
        torch.testing.assert_close(outs[0][0][mask], outs[1][0][mask], rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(outs[0][1][mask], outs[1][1][mask], rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(outs[0][2], outs[1][2], rtol=1e-3, atol=1e-5)
        with torch.no_grad():  # the reference pass: adapters off, through the compiled model too
            torch.testing.assert_close(compiled.reference_logprobs(batch)[mask], eager.reference_logprobs(batch)[mask],
                                       rtol=1e-4, atol=1e-4)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] > frames  # dynamo traced the model


def test_compiled_passes_equal_the_eager_ones_on_batches_of_new_lengths():
    assert_compiled_equals_eager("cpu", EAGER)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_inductor_compiled_passes_equal_the_eager_ones_on_a_gpu():
    """What ``torch_compile_learner=True`` runs on a GPU: inductor's kernels, dynamic shapes."""
    assert_compiled_equals_eager("cuda", TorchCompileConfig(torch_dynamo_backend="inductor"))


@pytest.mark.usefixtures("ray_session")
def test_the_learner_compiles_its_modules_when_the_config_asks():
    config = tiny_config().framework(torch_compile_learner=True, torch_compile_learner_dynamo_backend="eager")
    algo = config.build_algo()
    try:
        module = algo.learner_group._learner.module[DEFAULT_MODULE_ID].unwrapped()
        assert getattr(module, "_model_compiled", False) and module.trained_network()._compiled_call_impl is not None
        result = algo.train()  # an update through the compiled model
        assert math.isfinite(result["learners"][DEFAULT_MODULE_ID]["policy_loss"])
    finally:
        algo.stop()
    plain = tiny_config().build_algo()
    try:
        assert plain.learner_group._learner.module[DEFAULT_MODULE_ID].unwrapped().trained_network()._compiled_call_impl is None
    finally:
        plain.stop()


def test_compiling_generation_on_the_env_runners_is_refused():
    with pytest.raises(ValueError, match="torch_compile_worker"):
        tiny_config().framework(torch_compile_worker=True).validate()

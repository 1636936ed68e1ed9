"""DeferredBackend: the local EnvRunner of a run with remote EnvRunners builds its backend on first use."""

from __future__ import annotations

from typing import Any

import torch

from rllib_llm.generation import GenerationBackend, GenerationOutput
from rllib_llm.generation.deferred import DeferredBackend


class CountingBackend(GenerationBackend):
    builds = 0

    def __init__(self) -> None:
        CountingBackend.builds += 1
        self.synced: list[dict] = []
        self.released = 0
        self.last_sync = "none"

    def generate(self, prompts: list[list[int]], params: Any) -> list[GenerationOutput]:
        return [GenerationOutput(token_ids=[1], logprobs=[-1.0], text="x", finish_reason="stop") for _ in prompts]

    def update_weights(self, state: dict[str, Any]) -> None:
        self.synced.append(state)

    def release_memory(self) -> None:
        self.released += 1


def test_nothing_is_built_until_the_first_generate_which_brings_it_up_to_the_modules_weights():
    CountingBackend.builds = 0
    deferred = DeferredBackend(CountingBackend, module_state=lambda: {"w": 2})
    deferred.update_weights({"w": 1})  # a sync before the build: only marks it out of date
    deferred.release_memory()
    assert CountingBackend.builds == 0 and not deferred.built
    assert len(deferred.generate([[5], [6]], params=None)) == 2
    assert CountingBackend.builds == 1 and deferred.backend.synced == [{"w": 2}]  # the module's current state
    deferred.update_weights({"w": 3})
    deferred.release_memory()
    deferred.generate([[5]], params=None)
    assert CountingBackend.builds == 1 and deferred.backend.synced == [{"w": 2}, {"w": 3}]
    assert deferred.backend.released == 1 and deferred.last_sync == "none"  # the real backend's attributes


def test_without_a_sync_before_the_build_the_fresh_backend_is_not_synced_again():
    deferred = DeferredBackend(CountingBackend, module_state=lambda: {"w": 2})
    deferred.generate([[5]], params=None)
    assert deferred.backend.synced == []


def test_the_local_runner_of_a_run_with_remote_runners_builds_its_vllm_engine_only_when_it_plays(monkeypatch):
    from ray.rllib.core import COMPONENT_RL_MODULE

    from rllib_llm.core.single_agent_env_runner import LLMEnvRunner
    from tests.conftest import tiny_config
    from tests.fake_backends import install_fake_vllm

    install_fake_vllm(monkeypatch)
    config = tiny_config().generation(backend="vllm")
    alone = LLMEnvRunner(config=config)  # no remote runners: the local one samples, its engine is built at once
    assert type(alone.backend).__name__ == "VLLMBackend"

    local = LLMEnvRunner(config=config.copy(copy_frozen=False).env_runners(num_env_runners=1))
    assert isinstance(local.backend, DeferredBackend) and not local.backend.built
    weights = local.module.get_state()
    head = next(k for k in weights if k.endswith("lm_head.weight"))
    weights[head] = weights[head] + 1.0
    local.set_state({COMPONENT_RL_MODULE: weights})
    assert not local.backend.built  # the sync went to the module only
    local.sample(seeds=[1], group_size=1, explore=False)
    assert local.backend.built
    loaded = dict(local.backend.llm.engine_model.loaded)  # the engine got the module's synced weights
    torch.testing.assert_close(next(v for k, v in loaded.items() if k.endswith("lm_head.weight")),
                               torch.as_tensor(weights[head]))

"""The tuned example's custom memory, in one real rollout of the env runner with the tiny model."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from rllib_llm.columns import PROMPT
from rllib_llm.core.single_agent_env_runner import LLMEnvRunner
from rllib_llm.run.cli import load_tuned_example

EXAMPLE = Path(__file__).parents[2] / "tuned_examples" / "numberline_custom_memory.py"


@pytest.fixture(scope="module")
def example():
    config, stop = load_tuned_example(str(EXAMPLE))
    return config, stop


def test_example_exposes_config_and_stop_and_a_short_memory(example):
    from rllib_llm.algorithms import GiGPOConfig

    config, stop = example
    assert isinstance(config, GiGPOConfig) and config.env == "NumberLine" and stop
    memory = config.build_env_to_module_connector(spaces=None).connectors[0]
    assert len(inspect.getsource(type(memory)).splitlines()) < 30


def test_one_rollout_with_the_custom_memory(example):
    config = example[0].copy(copy_frozen=False)
    config.environment("NumberLine", env_config={"max_position": 3, "max_steps": 3})
    config.llm(model="tiny-random-llama").generation(max_new_tokens=6).group_rollouts(
        group_size=2, num_groups=1, max_episode_steps=3
    )
    config.validate()
    runner = LLMEnvRunner(config=config)
    episodes = runner.sample(seeds=[7])
    tokenizer = runner.module.tokenizer
    checked = 0
    for episode in episodes:
        prompts = [tokenizer.decode(ids) for ids in episode.get_extra_model_outputs(PROMPT)]
        assert "Positions visited" not in prompts[0]
        if len(prompts) > 1:
            reached = episode.get_infos(1)["anchor_obs"][1]
            assert f"Positions visited so far: {reached}" in prompts[1]
            checked += 1
    assert checked, "every episode ended after one step"

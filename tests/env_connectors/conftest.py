"""Helpers for the connector tests: episodes built by hand the way the env runner builds them."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from ray.rllib.connectors.env_to_module import EnvToModulePipeline
from ray.rllib.env.single_agent_episode import SingleAgentEpisode

from rllib_llm.columns import FEW_SHOT_KEY, PROMPT_IDS, RESPONSE_TEXT, TASK_KEY, TEMPLATE_KEY
from rllib_llm.core.models import load_tokenizer


@pytest.fixture(scope="session")
def tokenizer():
    return load_tokenizer("tiny-random-llama")


@pytest.fixture(scope="session")
def module(tokenizer):
    """Stands in for the LLMRLModule: the connectors only read ``.tokenizer`` (and ``.model``)."""
    return SimpleNamespace(tokenizer=tokenizer, model=None)


@pytest.fixture(scope="session")
def tiny_module(tokenizer):
    """A module with the tiny random model, for connectors that generate (the LLM summarizer)."""
    from rllib_llm.core.models import build_tiny_model

    return SimpleNamespace(tokenizer=tokenizer, model=build_tiny_model(tokenizer))


def new_episode(
    observation: Any,
    info: dict | None = None,
    *,
    template: Any = "{memory}{current_observation}",
    task: str = "",
    few_shot: list | None = None,
) -> SingleAgentEpisode:
    """An episode at reset with the custom_data keys the env runner fills."""
    episode = SingleAgentEpisode(observations=[observation], infos=[info or {}], len_lookback_buffer=0)
    episode.custom_data.update({TEMPLATE_KEY: template, TASK_KEY: task, FEW_SHOT_KEY: list(few_shot or [])})
    return episode


def add_step(
    episode: SingleAgentEpisode,
    observation: Any,
    action: str | None,
    reward: float = 0.0,
    info: dict | None = None,
    *,
    response: str | None = None,
) -> None:
    """One env step as the env runner records it (the env's reward, the response text apart)."""
    episode.add_env_step(
        observation,
        action,
        reward,
        infos=info or {},
        extra_model_outputs={RESPONSE_TEXT: response or f"<action>{action}</action>"},
    )


def episode_of(
    steps: list[tuple[str, str | None, float, dict]], first: str = "o0", **kwargs: Any
) -> SingleAgentEpisode:
    """An episode from ``(next_observation, action, env_reward, info)`` tuples."""
    episode = new_episode(first, **kwargs)
    for observation, action, reward, info in steps:
        add_step(episode, observation, action, reward, info)
    return episode


def pipeline(*connectors) -> EnvToModulePipeline:
    return EnvToModulePipeline(connectors=list(connectors))


def call(pipe, module, episodes: list[SingleAgentEpisode], metrics=None) -> dict:
    """The env runner's per-step call of the env-to-module pipeline."""
    return pipe(rl_module=module, batch={}, episodes=episodes, explore=True, shared_data={}, metrics=metrics)


def play(env, connectors: list, module, policy: Callable[[Any], str], steps: int, seed: int = 0) -> list[list[int]]:
    """Plays ``env`` for ``steps`` steps with ``policy(env) -> action``, calling the pipeline of ``connectors``
    before each step like the env runner (env template and task in custom_data); returns the prompt ids."""
    pipe = pipeline(*connectors)
    observation, info = env.reset(seed=seed)
    episode = new_episode(observation, info, template=env.prompt_template, task=env.task_description)
    prompts = []
    for _ in range(steps):
        prompts.append(call(pipe, module, [episode])[PROMPT_IDS][0])
        action = policy(env)
        observation, reward, terminated, truncated, info = env.step(action)
        assert not (terminated or truncated), "the test policy must keep the episode running"
        add_step(episode, observation, action, reward, info)
    return prompts

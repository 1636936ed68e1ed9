"""Helpers for the algorithm tests: fake episodes as the LLM EnvRunner records them, tiny modules, and
tuned examples shrunk to the tiny model. Ray comes from the session fixture ``ray_session`` in
tests/conftest.py."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.env.single_agent_episode import SingleAgentEpisode

from rllib_llm.algorithms.learner_connectors import StepColumns
from rllib_llm.columns import ACTION_LOGP, ANCHOR, GROUP_ID, PROMPT, RESPONSE, VALID

TUNED_EXAMPLES = Path(__file__).resolve().parents[2] / "tuned_examples"


def make_episode(
    group_id: str,
    rewards: Sequence[float],
    anchors: Sequence[Any] | None = None,
    responses: Sequence[list[int]] | None = None,
    prompt: Sequence[int] = (40, 41, 42),
    valid: Sequence[bool] | None = None,
) -> SingleAgentEpisode:
    """An episode shaped like LLMEnvRunner's: per-step prompt/response ids, old log-probs, anchors (and
    validity, when given)."""
    episode = SingleAgentEpisode(observations=["start"], infos=[{}], len_lookback_buffer=0)
    for t, reward in enumerate(rewards):
        response = list(responses[t]) if responses is not None else [50 + t, 51 + t]
        episode.add_env_step(
            f"obs {t}",
            "+",
            float(reward),
            infos={},
            terminated=t == len(rewards) - 1,
            extra_model_outputs={
                PROMPT: list(prompt) + [60 + t],
                RESPONSE: response,
                ACTION_LOGP: [-1.0 - 0.1 * j for j in range(len(response))],
                ANCHOR: anchors[t] if anchors is not None else t,
                **({VALID: bool(valid[t])} if valid is not None else {}),
            },
        )
    episode.custom_data[GROUP_ID] = group_id
    return episode


def run_learner_connector(config, module, episodes: list) -> tuple[dict[str, np.ndarray], StepColumns]:
    """The config's learner pipeline up to (not including) NumpyToTensor: (numpy token batch columns, the
    step columns StepsToTokenBatch received)."""
    pipeline = config.build_learner_connector(None, None)
    batch: dict = {}
    steps: StepColumns = {}
    for piece in pipeline.connectors[:-1]:
        if type(piece).__name__ == "StepsToTokenBatch":
            steps = dict(batch[DEFAULT_MODULE_ID])
        batch = piece(rl_module={DEFAULT_MODULE_ID: module}, batch=batch, episodes=episodes, shared_data={})
    return batch[DEFAULT_MODULE_ID], steps


def tiny_module(**model_config):
    from rllib_llm.core.rl_module import LLMRLModule

    return LLMRLModule(model_config={"model": {"name_or_path": "tiny-random-llama"}, **model_config})


def shrink_to_tiny(config):
    """A tuned example's config on the tiny random model, one small group rollout, one epoch."""
    return (
        config.copy(copy_frozen=False)
        .llm(model="tiny-random-llama")
        .generation(max_new_tokens=4)
        .group_rollouts(group_size=2, num_groups=2, max_episode_steps=2)
        .training(minibatch_size=8, num_epochs=1, max_sampling_rounds=2)
        .evaluation(evaluation_num_seeds=2)
    )


def make_groups_informative(algo, every: int = 2) -> None:
    """Adds 1 to the last reward of the first episode of every ``every``-th group of each rollout.

    The tiny random model never produces a valid action, so all its episodes get the same return and
    every group-relative advantage would be 0; this gives the smoke tests something to learn from.
    """
    runner = algo.env_runner
    original = runner.sample

    def sample(*args, **kwargs):
        episodes = original(*args, **kwargs)
        first: dict[str, SingleAgentEpisode] = {}
        for episode in episodes:
            first.setdefault(episode.custom_data[GROUP_ID], episode)
        for episode in list(first.values())[::every]:
            episode.rewards.data[-1] += 1.0
        return episodes

    runner.sample = sample


def learner_weights(algo) -> dict[str, np.ndarray]:
    state = algo.learner_group.get_state(components="learner/rl_module/default_policy")
    return {k: np.array(v) for k, v in state["learner"]["rl_module"]["default_policy"].items()}

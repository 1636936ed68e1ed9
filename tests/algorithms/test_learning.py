"""RL must learn: GiGPO raises greedy success on a contextual task from chance to near 1 (tiny model, 3 seeds).

The task (:class:`ParityBandit`): one-step episodes whose observation names a parity ("even" or "odd", by the
seed); the reply's first byte must have that parity. The tiny random model (byte tokenizer) starts at chance:
its greedy first byte ignores the context, so it is right on about half the seeds. Learning means making the
first byte depend on the observation, which no constant policy does.

The same run with the advantages zeroed, shifted by one row, or negated (a learner connector piece after
ComputeAdvantages) must not learn: each is a pipeline bug the real test would otherwise let through.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pytest

from rllib_llm.envs.base import TextEnv

pytestmark = pytest.mark.usefixtures("ray_session")

PARITIES = ("even", "odd")


class ParityBandit(TextEnv):
    """One step: reward 1 when the reply's first byte has the parity the observation names, else 0."""

    prompt_template: ClassVar[str] = "{current_observation}"
    few_shot: ClassVar[list] = []
    action_format: ClassVar[str] = "raw"

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        super().reset(seed=seed)
        self.parity = PARITIES[int(self.np_random.integers(2))]
        return " ".join([self.parity] * 4), {"is_action_valid": True, "won": False}

    def step(self, action: str | None) -> tuple[str, float, bool, bool, dict]:
        data = (action or "").encode("utf-8", "replace")
        won = bool(data) and data[0] % 2 == PARITIES.index(self.parity)
        return "", float(won), True, False, {"is_action_valid": True, "won": won}


def mutation(kind: str):
    """A learner connector piece that breaks the advantages the way a pipeline bug would."""
    from ray.rllib.connectors.connector_v2 import ConnectorV2

    from rllib_llm.columns import ADVANTAGES

    class Mutate(ConnectorV2):
        def __call__(self, *, rl_module, batch, episodes, explore=None, shared_data=None, metrics=None, **kwargs):
            for columns in batch.values():
                advantages = columns[ADVANTAGES]
                if kind == "zero":
                    columns[ADVANTAGES] = np.zeros_like(advantages)
                elif kind == "shift":  # each row gets its neighbour's advantage
                    columns[ADVANTAGES] = np.roll(advantages, 1)
                elif kind == "negate":
                    columns[ADVANTAGES] = -advantages
            return batch

    return lambda *args, **kwargs: Mutate()


def bandit_config(seed: int, mutate: str | None = None) -> Any:
    from rllib_llm.algorithms import GiGPOConfig
    from rllib_llm.env_connectors import ChatPromptBuilder

    config = (
        GiGPOConfig()
        .environment(ParityBandit)
        .env_runners(env_to_module_connector=lambda env, spaces, device: [
            ChatPromptBuilder(system_prompt="", template="{current_observation}", output_format="")])
        .llm(model="tiny-random-llama")
        .generation(max_new_tokens=1, temperature=1.0)
        .group_rollouts(group_size=4, num_groups=16, max_episode_steps=1, invalid_action_penalty=0.0)
        .training(lr=3e-2, minibatch_size=64, advantage_norm="mean")
        .evaluation(evaluation_num_seeds=32)
        .debugging(seed=seed)
    )
    if mutate is not None:
        config.training(learner_connector=mutation(mutate))
    return config


def greedy_success_after(seed: int, iterations: int, mutate: str | None = None) -> tuple[float, float]:
    algo = bandit_config(seed, mutate).build_algo()
    try:
        before = algo.evaluate_seeds()["success_rate"]
        for _ in range(iterations):
            algo.train()
        return before, algo.evaluate_seeds()["success_rate"]
    finally:
        algo.stop()


ITERATIONS = 10


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gigpo_learns_the_contextual_task(seed):
    before, after = greedy_success_after(seed, ITERATIONS)
    assert before <= 0.7  # chance: the untrained greedy byte ignores the context
    assert after >= 0.9, (before, after)


@pytest.mark.parametrize("mutate", ["zero", "shift", "negate"])
def test_broken_advantages_do_not_learn(mutate):
    before, after = greedy_success_after(0, ITERATIONS, mutate)
    assert after <= 0.7, (mutate, before, after)

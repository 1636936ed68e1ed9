"""Smoke tests: each algorithm's tuned example, shrunk to the tiny model, runs one training iteration."""

from __future__ import annotations

import numpy as np
import pytest

from rllib_llm.algorithms import DAPO, GRPO, GSPO, PPO, RLOO, DynamicGiGPO, ReinforcePlusPlus
from rllib_llm.run.cli import load_tuned_example
from tests.algorithms.conftest import TUNED_EXAMPLES, learner_weights, make_groups_informative, shrink_to_tiny

pytestmark = pytest.mark.usefixtures("ray_session")

EXAMPLES = {
    "grpo": GRPO,
    "rloo": RLOO,
    "reinforce_pp": ReinforcePlusPlus,
    "ppo": PPO,
    "dapo": DAPO,
    "gspo": GSPO,
    "dynamic_gigpo": DynamicGiGPO,
}


def build(name: str):
    config, stop = load_tuned_example(str(TUNED_EXAMPLES / f"numberline_{name}.py"))
    assert config.llm_model["name_or_path"] == "smollm2-135m-instruct"
    assert stop.get("training_iteration", 0) >= 1
    return shrink_to_tiny(config).build_algo()


def changed(before: dict, after: dict) -> set[str]:
    return {k for k in before if not np.allclose(before[k], after[k])}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_tuned_example_trains_one_iteration_on_the_tiny_model(name):
    algo = build(name)
    try:
        assert type(algo) is EXAMPLES[name]
        dynamic = algo.config.dynamic_sampling
        if name == "dapo":  # (DynamicGiGPO shares the mixin; once is enough)
            # No valid action, all returns equal: every round is uninformative, so no update at all.
            before = learner_weights(algo)
            result = algo.train()
            assert result["dynamic_sampling_rounds"] == algo.config.max_sampling_rounds == 2
            assert result["num_groups_trained"] == 0
            assert not changed(before, learner_weights(algo))
        make_groups_informative(algo)  # from now on, one of the 2 groups per rollout is informative
        before = learner_weights(algo)
        result = algo.train()
        learner = result["learners"]["default_policy"]
        assert {"policy_loss", "entropy", "clip_fraction"} <= set(learner)
        assert changed(before, learner_weights(algo)), "one iteration should move the weights"
        if dynamic:
            assert result["dynamic_sampling_rounds"] == 2  # 1 informative group per rollout, 2 needed
            assert result["num_groups_trained"] == 2
        if name == "ppo":
            assert {"vf_loss", "explained_variance"} <= set(learner)
            assert {"value_head.weight", "value_head.bias"} <= changed(before, learner_weights(algo))
            assert not hasattr(algo.env_runner.module, "value_head") or algo.env_runner.module.value_head is None
        if name == "reinforce_pp":
            assert algo.config.kl_reward_coeff > 0
    finally:
        algo.stop()


@pytest.mark.parametrize("name", ["sokoban_gigpo_qwen", "sokoban_grpo_qwen"])
def test_the_real_model_recipes_train_one_iteration_as_configured(name):
    """The GPU recipes' Learner as shipped (bf16 base with float32 LoRA adapters, activation checkpointing,
    micro-batches) on the tiny model: one iteration moves only the adapters."""
    from rllib_llm.run.cli import with_model

    config, _ = load_tuned_example(str(TUNED_EXAMPLES / f"{name}.py"))
    assert config.llm_model["dtype"] == "bfloat16" and config.llm_model["lora"] and config.gradient_checkpointing
    config = with_model(config.copy(copy_frozen=False), "tiny-random-llama")
    config.generation(max_new_tokens=4).group_rollouts(group_size=2, num_groups=2, max_episode_steps=2)
    config.training(minibatch_size=8, micro_batch_size=2).evaluation(evaluation_num_seeds=2)
    algo = config.build_algo()
    try:
        make_groups_informative(algo)
        before = learner_weights(algo)
        algo.train()
        moved = changed(before, learner_weights(algo))
        assert moved and all("lora_" in key for key in moved)
    finally:
        algo.stop()

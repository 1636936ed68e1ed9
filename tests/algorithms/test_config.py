"""Each algorithm's config defaults, the field validation, and what the config asks of the RLModule."""

from __future__ import annotations

import re

import pytest

from rllib_llm.algorithms import (
    ALGORITHMS,
    DAPO,
    GRPO,
    GSPO,
    PPO,
    RLOO,
    DAPOConfig,
    DynamicGiGPO,
    DynamicGiGPOConfig,
    GiGPO,
    GRPOConfig,
    GSPOConfig,
    PPOConfig,
    ReinforcePlusPlus,
    ReinforcePlusPlusConfig,
    RLOOConfig,
)
from rllib_llm.algorithms.learner_connectors import ADVANTAGE_ESTIMATORS
from rllib_llm.algorithms.losses import POLICY_LOSSES


def tiny(cls=GRPOConfig):
    return cls().environment("NumberLine").llm(model="tiny-random-llama").generation(max_new_tokens=8)


@pytest.mark.parametrize(
    "cls, algo, expected",
    [
        (GRPOConfig, GRPO, {"advantage_estimator": "grpo", "policy_loss": "ppo", "dynamic_sampling": False}),
        (RLOOConfig, RLOO, {"advantage_estimator": "rloo", "policy_loss": "ppo"}),
        (ReinforcePlusPlusConfig, ReinforcePlusPlus, {"advantage_estimator": "reinforce_pp", "kl_reward_coeff": 0.001}),
        (PPOConfig, PPO, {"advantage_estimator": "gae", "lambda_": 0.95, "vf_loss_coeff": 0.5}),
        (DAPOConfig, DAPO, {"advantage_estimator": "grpo", "clip_ratio_high": 0.28, "dynamic_sampling": True,
                            "loss_agg_mode": "token-mean"}),
        (GSPOConfig, GSPO, {"policy_loss": "gspo", "clip_ratio_low": 3e-4, "clip_ratio_high": 4e-4,
                            "loss_agg_mode": "seq-mean-token-mean", "clip_ratio_c": None}),
        (DynamicGiGPOConfig, DynamicGiGPO, {"advantage_estimator": "gigpo", "dynamic_sampling": True,
                                            "clip_ratio_high": 0.28}),
    ],
)
def test_algorithm_defaults(cls, algo, expected):
    config = cls()
    assert config.algo_class is algo
    assert isinstance(algo.get_default_config(), cls)
    assert {k: getattr(config, k) for k in expected} == expected
    tiny(cls).validate()


def test_every_algorithm_is_registered_and_every_name_is_selectable():
    assert set(ALGORITHMS) == {"grpo", "gigpo", "dynamic_gigpo", "rloo", "reinforce_pp", "ppo", "dapo", "gspo"}
    assert issubclass(DynamicGiGPO, GiGPO)
    for estimator in ADVANTAGE_ESTIMATORS:
        for loss in POLICY_LOSSES:
            tiny().training(advantage_estimator=estimator, policy_loss=loss).validate()


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(policy_loss="trpo"), re.escape("policy_loss must be one of ('gspo', 'ppo'), got 'trpo'")),
        (dict(step_grouping="fuzzy"), re.escape("step_grouping must be one of ('exact', 'similarity', 'exact_across_groups')")),
        (dict(similarity_threshold=0.0), r"similarity_threshold must be in \(0, 1\]"),
        (dict(similarity_threshold=1.5), r"similarity_threshold must be in \(0, 1\]"),
        (dict(lambda_=1.5), r"lambda_ must be in \[0, 1\]"),
        (dict(vf_loss_coeff=-1.0), "vf_loss_coeff must be >= 0"),
        (dict(vf_clip_param=0.0), "vf_clip_param must be > 0 .a number or None."),
        (dict(clip_ratio_c=1.0), "clip_ratio_c must be > 1"),
        (dict(kl_reward_coeff=-0.1), "kl_reward_coeff must be >= 0"),
        (dict(kl_reward_estimator="kl4"), "kl_reward_estimator must be one of"),
        (dict(entropy_coeff="high"), "entropy_coeff must be >= 0"),
        (dict(max_sampling_rounds=0), "max_sampling_rounds must be >= 1 .an int."),
        (dict(max_sampling_rounds=2.5), "max_sampling_rounds must be >= 1 .an int."),
        (dict(overlong_buffer_len=-1), "overlong_buffer_len must be >= 0"),
        (dict(overlong_buffer_len=8), r"overlong_buffer_len must be < max_new_tokens \(8\)"),
        (dict(group_stats_over_steps="yes"), "group_stats_over_steps must be True or False"),
        (dict(dynamic_sampling=True), "dynamic_sampling=True needs an algorithm with dynamic sampling"),
        (dict(updates_per_rollout=0), "updates_per_rollout must be >= 1 .an int."),
        (dict(updates_per_rollout=2), "updates_per_rollout=2 needs async_rollouts=True"),
        (dict(async_rollouts=True, updates_per_rollout=2, max_staleness=1),
         r"updates_per_rollout=2 trains a rollout's groups up to 3 updates after their weights: set max_staleness >= 3"),
    ],
)
def test_invalid_fields_are_reported_by_name_with_the_allowed_values(change, message):
    with pytest.raises(ValueError, match=message):
        tiny().training(**change).validate()


def test_the_row_penalty_mode_needs_row_statistics_and_a_group_estimator():
    with pytest.raises(ValueError, match="invalid_action_penalty_mode must be one of"):
        tiny().group_rollouts(invalid_action_penalty_mode="step").validate()
    with pytest.raises(ValueError, match="invalid_action_penalty_mode='row' .verl-agent's. scores step rows"):
        tiny().group_rollouts(invalid_action_penalty_mode="row").validate()
    tiny().group_rollouts(invalid_action_penalty_mode="row").training(group_stats_over_steps=True).validate()


def test_all_errors_are_reported_at_once():
    with pytest.raises(ValueError) as info:
        tiny().training(policy_loss="x", lambda_=2.0, clip_ratio_c=0.5).validate()
    assert all(f in str(info.value) for f in ("policy_loss", "lambda_", "clip_ratio_c"))


def test_dual_clip_can_be_switched_off_and_vf_clip_too():
    tiny().training(clip_ratio_c=None, vf_clip_param=None).validate()


def test_module_spec_gets_a_value_head_only_with_a_critic():
    assert tiny(PPOConfig).get_default_rl_module_spec().model_config["value_head"] is True
    assert tiny(GRPOConfig).get_default_rl_module_spec().model_config["value_head"] is False
    detached = tiny(PPOConfig).training(value_head_detach=True).get_default_rl_module_spec()
    assert detached.model_config["value_head_detach"] is True


def test_module_spec_gets_a_reference_for_kl_loss_or_kl_reward():
    def use_reference(config):
        return config.get_default_rl_module_spec().model_config["use_reference"]

    assert use_reference(tiny(ReinforcePlusPlusConfig)) is True
    assert use_reference(tiny(ReinforcePlusPlusConfig).training(kl_reward_coeff=0.0)) is False
    assert use_reference(tiny(GRPOConfig)) is False
    assert use_reference(tiny(GRPOConfig).training(kl_coeff=0.01)) is True


def test_overlong_penalty_piece_is_in_the_pipeline_only_when_enabled():
    def pieces(config):
        return [type(c).__name__ for c in config.build_learner_connector(None, None).connectors]

    assert "OverlongPenalty" not in pieces(tiny(DAPOConfig))
    assert pieces(tiny(DAPOConfig).training(overlong_buffer_len=4))[:4] == [
        "FlattenSteps", "InvalidActionPenalty", "OverlongPenalty", "ComputeAdvantages"
    ]

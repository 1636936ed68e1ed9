"""GRPO and GiGPO advantages against numbers computed by hand."""

import math

import numpy as np
import pytest

from rllib_llm.algorithms.advantages import (
    discounted_returns,
    factorize,
    gigpo_advantages,
    group_normalize,
    grpo_advantages,
)


def test_group_normalize_std_and_mean_by_hand():
    # group 0: [1, 0, 0, 1] -> mean 0.5, unbiased std sqrt(4 * 0.25 / 3) = 0.57735
    # group 1: [2] alone -> 0
    values = np.array([1.0, 0.0, 0.0, 1.0, 2.0])
    groups = np.array([0, 0, 0, 0, 1])
    z = 0.5 / math.sqrt(1 / 3)
    np.testing.assert_allclose(group_normalize(values, groups, "std", eps=0.0), [z, -z, -z, z, 0.0], rtol=1e-9)
    np.testing.assert_allclose(group_normalize(values, groups, "mean"), [0.5, -0.5, -0.5, 0.5, 0.0])


def test_unknown_norm_mode_is_a_clear_error():
    with pytest.raises(ValueError, match="advantage normalization must be one of"):
        group_normalize(np.ones(2), np.zeros(2, dtype=int), "zscore")


def test_discounted_returns_by_hand():
    # episode 0: rewards [0, 0, 1], gamma 0.5 -> [0.25, 0.5, 1]; episode 1: [1, -1] -> [0.5, -1]
    rewards = np.array([0.0, 0.0, 1.0, 1.0, -1.0])
    episodes = np.array([0, 0, 0, 1, 1])
    np.testing.assert_allclose(discounted_returns(rewards, episodes, 0.5), [0.25, 0.5, 1.0, 0.5, -1.0])


def test_grpo_broadcasts_group_normalized_return_to_every_step():
    # One group of two episodes: returns 1 (2 steps) and 0 (1 step) -> mean 0.5, std sqrt(0.5)
    rewards = np.array([0.0, 1.0, 0.0])
    episodes = np.array([0, 0, 1])
    groups = np.array([0, 0, 0])
    a = 0.5 / math.sqrt(0.5)
    np.testing.assert_allclose(grpo_advantages(rewards, episodes, groups, eps=0.0), [a, a, -a], rtol=1e-9)


def test_gigpo_by_hand():
    # Group of two episodes starting in state S.
    #   episode 0: S -> (reward 0) -> T -> (reward 1): returns G = [0.9, 1.0] with gamma 0.9
    #   episode 1: S -> (reward 0) -> U (truncated):   returns G = [0.0]
    # Episode level (mean mode): returns 1 and 0 -> +0.5 (both steps of ep 0), -0.5 (ep 1).
    # Step level: anchor S holds steps 0 (G 0.9) and 2 (G 0.0): mean 0.45 -> +0.45, -0.45; anchor T alone -> 0.
    rewards = np.array([0.0, 1.0, 0.0])
    episodes = np.array([0, 0, 1])
    groups = np.array([0, 0, 0])
    anchors = factorize(["S", "T", "S"])
    adv = gigpo_advantages(rewards, episodes, groups, anchors, gamma=0.9, omega=1.0, mode="mean")
    np.testing.assert_allclose(adv, [0.5 + 0.45, 0.5 + 0.0, -0.5 - 0.45])
    # omega scales the step part only.
    adv = gigpo_advantages(rewards, episodes, groups, anchors, gamma=0.9, omega=0.5, mode="mean")
    np.testing.assert_allclose(adv, [0.5 + 0.225, 0.5, -0.5 - 0.225])


def test_gigpo_same_anchor_in_different_groups_is_not_pooled():
    # Two groups, each: one episode with return 1 and one with 0, all steps in anchor "S".
    rewards = np.array([1.0, 0.0, 1.0, 0.0])
    episodes = np.arange(4)
    groups = np.array([0, 0, 1, 1])
    anchors = factorize(["S"] * 4)
    adv = gigpo_advantages(rewards, episodes, groups, anchors, gamma=1.0, omega=1.0, mode="mean")
    np.testing.assert_allclose(adv, [1.0, -1.0, 1.0, -1.0])


def test_factorize_is_order_of_first_appearance():
    np.testing.assert_array_equal(factorize([(1, 2), "a", (1, 2), "b"]), [0, 1, 0, 2])

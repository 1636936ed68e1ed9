"""Advantage estimators against numbers computed by hand (arithmetic written out), plus invariants."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rllib_llm.algorithms.advantages import (
    batch_normalize,
    dense_ids,
    discounted_cumsum,
    discounted_returns,
    factorize,
    factorize_steps,
    gae_advantages,
    gigpo_advantages,
    group_normalize,
    grpo_advantages,
    masked_whiten,
    reinforce_pp_advantages,
    rloo_advantages,
    similarity_step_groups,
    step_groups,
)


def same_partition(a, b) -> bool:
    """Whether two id arrays split the rows the same way (ids themselves may differ)."""
    a, b = np.asarray(a), np.asarray(b)
    return len(set(zip(a.tolist(), b.tolist(), strict=True))) == len(set(a.tolist())) == len(set(b.tolist()))


# --- by hand --------------------------------------------------------------------------------------------


def test_rloo_by_hand():
    # Group "g": episode 0 = 2 steps, rewards [0, 1] (return 1); episode 1 = return 0; episode 2 = 0.5.
    #   ep 0: 1   - (0 + 0.5) / 2 =  0.75      ep 1: 0 - (1 + 0.5) / 2 = -0.75      ep 2: 0.5 - (1 + 0) / 2 = 0
    # Group "h": episode 3 alone (return 2): no other episode, advantage 0.
    rewards = np.array([0.0, 1.0, 0.0, 0.5, 2.0])
    episodes = np.array([0, 0, 1, 2, 3])
    groups = np.array([0, 0, 0, 0, 1])
    np.testing.assert_allclose(rloo_advantages(rewards, episodes, groups), [0.75, 0.75, -0.75, 0.0, 0.0])


def test_rloo_over_steps_leaves_one_row_out_by_hand():
    # The same batch, rows instead of episodes (verl-agent): group "g" rows carry returns [1, 1, 0, 0.5].
    #   row 0: 1 - (1 + 0 + 0.5) / 3 = 0.5 (its own episode's other step is in the baseline); row 1 the same
    #   row 2: 0 - (1 + 1 + 0.5) / 3 = -5/6      row 3: 0.5 - (1 + 1 + 0) / 3 = -1/6      group "h": one row, 0
    rewards = np.array([0.0, 1.0, 0.0, 0.5, 2.0])
    episodes = np.array([0, 0, 1, 2, 3])
    groups = np.array([0, 0, 0, 0, 1])
    np.testing.assert_allclose(rloo_advantages(rewards, episodes, groups, over_steps=True),
                               [0.5, 0.5, -5 / 6, -1 / 6, 0.0])


def test_grpo_stats_over_steps_weigh_long_episodes():
    # Episode 0 has 2 steps and return 1, episode 1 one step and return 0 (mean mode).
    #   per episode: mean(1, 0) = 0.5             -> [0.5, 0.5, -0.5]
    #   per step:    mean(1, 1, 0) = 2/3 (verl-agent) -> [1/3, 1/3, -2/3]
    rewards, episodes, groups = np.array([0.0, 1.0, 0.0]), np.array([0, 0, 1]), np.zeros(3, dtype=int)
    np.testing.assert_allclose(grpo_advantages(rewards, episodes, groups, "mean"), [0.5, 0.5, -0.5])
    np.testing.assert_allclose(grpo_advantages(rewards, episodes, groups, "mean", over_steps=True), [1 / 3, 1 / 3, -2 / 3])


def test_invalid_action_penalty_on_its_own_row_as_verl_agent_by_hand():
    # verl-agent (apply_invalid_action_penalty, then the estimators over step rows): every row scores its
    # episode's env return, minus the penalty (0.1) on the rows whose action was invalid.
    # Group of 2: episode 0 = env rewards [0, 1] (return 1), its first action invalid; episode 1 = [0], valid.
    #   row scores [1 - 0.1, 1, 0] = [0.9, 1.0, 0.0], mean 1.9 / 3
    #   GRPO (mean): [0.9 - 1.9/3, 1 - 1.9/3, -1.9/3]
    #   RLOO rows:   [0.9 - 0.5, 1 - 0.45, 0 - 0.95] = [0.4, 0.55, -0.95]
    #   GiGPO step level (gamma 0.5): returns [0 + 0.5 * 1, 1, 0] minus the penalty after discounting ->
    #   [0.4, 1, 0]; anchor groups {row 0, row 2} (same anchor) -> +-0.2, {row 1} alone -> 0
    rewards, episodes, groups = np.array([0.0, 1.0, 0.0]), np.array([0, 0, 1]), np.zeros(3, dtype=int)
    offset = np.array([-0.1, 0.0, 0.0])
    grpo = [0.9 - 1.9 / 3, 1 - 1.9 / 3, -1.9 / 3]
    np.testing.assert_allclose(grpo_advantages(rewards, episodes, groups, "mean", over_steps=True, row_offset=offset),
                               grpo)
    np.testing.assert_allclose(rloo_advantages(rewards, episodes, groups, over_steps=True, row_offset=offset),
                               [0.4, 0.55, -0.95])
    gigpo = gigpo_advantages(rewards, episodes, groups, np.array([0, 1, 0]), gamma=0.5, mode="mean", over_steps=True,
                             row_offset=offset)
    np.testing.assert_allclose(gigpo, np.add(grpo, [0.2, 0.0, -0.2]))
    with pytest.raises(ValueError, match="needs over_steps=True"):
        grpo_advantages(rewards, episodes, groups, row_offset=offset)


def test_the_row_mode_reaches_the_estimators_through_the_steps_valid_column():
    from types import SimpleNamespace

    from rllib_llm.algorithms.learner_connectors import ADVANTAGE_ESTIMATORS
    from rllib_llm.columns import ANCHOR_INDEX, EPISODE_INDEX, GROUP_INDEX, REWARDS, VALID

    steps = {REWARDS: np.array([0.0, 1.0, 0.0]), EPISODE_INDEX: np.array([0, 0, 1]), GROUP_INDEX: np.zeros(3, int),
             ANCHOR_INDEX: np.array([0, 1, 0]), VALID: np.array([False, True, True])}
    config = SimpleNamespace(advantage_norm="mean", group_stats_over_steps=True, invalid_action_penalty=0.1,
                             invalid_action_penalty_mode="row")
    np.testing.assert_allclose(ADVANTAGE_ESTIMATORS["grpo"](steps, config), [0.9 - 1.9 / 3, 1 - 1.9 / 3, -1.9 / 3])
    np.testing.assert_allclose(ADVANTAGE_ESTIMATORS["rloo"](steps, config), [0.4, 0.55, -0.95])
    config.invalid_action_penalty_mode = "reward"  # the penalty is in the rewards then, not added again
    np.testing.assert_allclose(ADVANTAGE_ESTIMATORS["grpo"](steps, config), [1 / 3, 1 / 3, -2 / 3])


def test_gae_by_hand():
    # Episode 0: rewards [0, 1], values [0.5, 0.8]; gamma 0.9, lambda 0.5.
    #   t=1 (last, next value 0): delta = 1 + 0.9 * 0 - 0.8 = 0.2             A = 0.2
    #   t=0:                      delta = 0 + 0.9 * 0.8 - 0.5 = 0.22           A = 0.22 + 0.9 * 0.5 * 0.2 = 0.31
    # Episode 1: one step, reward -0.1, value 0.3: delta = -0.1 - 0.3 = -0.4 (it must not bootstrap from ep 0).
    # Targets = A + V: [0.81, 1.0, -0.1].
    adv, targets = gae_advantages([0.0, 1.0, -0.1], [0.5, 0.8, 0.3], [0, 0, 1], gamma=0.9, lam=0.5)
    np.testing.assert_allclose(adv, [0.31, 0.2, -0.4])
    np.testing.assert_allclose(targets, [0.81, 1.0, -0.1])


def test_reinforce_pp_by_hand():
    # Row 0: 2 response tokens, KL [0.5, 1.0], step return 1. Row 1: 1 token, KL [2.0], step return 0.
    # kl_coeff 0.1 -> token rewards row 0: [-0.05, -0.1 + 1.0] = [-0.05, 0.9]; row 1: [-0.2].
    # Token returns (token_gamma 1): row 0: [-0.05 + 0.9, 0.9] = [0.85, 0.9]; row 1: [-0.2].
    # Whitening over the 3 tokens: mean = (0.85 + 0.9 - 0.2) / 3 = 0.51667;
    #   var (unbiased) = ((0.33333)^2 + (0.38333)^2 + (-0.71667)^2) / 2 = 0.38583.
    mask = np.array([[1, 1, 0], [1, 0, 0]])
    kl = np.array([[0.5, 1.0, 9.0], [2.0, 7.0, 7.0]])  # padding KL must be ignored
    adv, returns = reinforce_pp_advantages(np.array([1.0, 0.0]), kl, mask, kl_coeff=0.1)
    np.testing.assert_allclose(returns[mask == 1], [0.85, 0.9, -0.2])
    mean = (0.85 + 0.9 - 0.2) / 3
    std = math.sqrt(((0.85 - mean) ** 2 + (0.9 - mean) ** 2 + (-0.2 - mean) ** 2) / 2 + 1e-8)
    np.testing.assert_allclose(adv, [[(0.85 - mean) / std, (0.9 - mean) / std, 0.0], [(-0.2 - mean) / std, 0.0, 0.0]])


def test_reinforce_pp_token_discount_by_hand():
    # One row, 3 tokens, no KL, step return 1 on the last token, token_gamma 0.5 -> returns [0.25, 0.5, 1].
    _, returns = reinforce_pp_advantages(np.array([1.0]), np.zeros((1, 3)), np.ones((1, 3)), 0.0, token_gamma=0.5)
    np.testing.assert_allclose(returns, [[0.25, 0.5, 1.0]])


def test_masked_whiten_by_hand():
    # Masked entries 1, 3 -> mean 2, unbiased var ((-1)^2 + 1^2) / 1 = 2 -> [-1/sqrt(2), 1/sqrt(2)].
    out = masked_whiten(np.array([1.0, 3.0, 100.0]), np.array([1, 1, 0]), eps=0.0)
    np.testing.assert_allclose(out, [-1 / math.sqrt(2), 1 / math.sqrt(2), 0.0])


def test_batch_normalize_by_hand():
    # [1, 2, 3]: mean 2, unbiased std 1 -> [-1, 0, 1]; mean mode only centers.
    np.testing.assert_allclose(batch_normalize([1.0, 2.0, 3.0], "std", eps=0.0), [-1.0, 0.0, 1.0])
    np.testing.assert_allclose(batch_normalize([1.0, 2.0, 3.0], "mean"), [-1.0, 0.0, 1.0])
    np.testing.assert_allclose(batch_normalize([1.0, 2.0, 5.0], "mean"), [-1.667, -0.667, 2.333], atol=1e-3)


def test_discounted_returns_mixed_lengths_by_hand():
    # Episodes of lengths 1, 3, 2 (gamma 0.5): [2] | [1, 0, 4] -> [1 + 0.5 * 2, 0 + 0.5 * 4, 4] = [2, 2, 4]
    # | [0, 1] -> [0.5, 1].
    rewards = [2.0, 1.0, 0.0, 4.0, 0.0, 1.0]
    episodes = [0, 1, 1, 1, 2, 2]
    np.testing.assert_allclose(discounted_returns(rewards, episodes, 0.5), [2.0, 2.0, 2.0, 4.0, 0.5, 1.0])


def test_discounted_cumsum_handles_episodes_longer_than_16_bits():
    # One 70,000-step episode of reward 1 with gamma 1: G_t = 70,000 - t (the int64 sort path).
    n = 70_000
    out = discounted_cumsum(np.ones(n), np.zeros(n, dtype=int), 1.0)
    np.testing.assert_allclose(out[[0, 1, n - 1]], [n, n - 1, 1])


def test_similarity_step_groups_by_hand():
    # Threshold 0.9. SequenceMatcher ratio = 2 * matches / total length.
    #   "abcdefghij" vs "abcdefghiX": 2 * 9 / 20 = 0.90 -> joins the first cluster (>= threshold)
    #   "abcdefghXY" vs leader "abcdefghij": 2 * 8 / 20 = 0.80 -> new cluster, although it is 0.9-similar to
    #   "abcdefghiX": only leaders are compared, as in verl-agent.
    #   "zzzz": new cluster. Group 1's "abcdefghij" is not pooled with group 0's.
    anchors = ["abcdefghij", "abcdefghiX", "abcdefghXY", "zzzz", "abcdefghij", "abcdefghij"]
    groups = [0, 0, 0, 0, 0, 1]
    ids = similarity_step_groups(groups, anchors, 0.9)
    assert same_partition(ids, [0, 0, 1, 2, 0, 3])
    # At 0.95 only the identical anchors pool.
    assert same_partition(similarity_step_groups(groups, anchors, 0.95), [0, 1, 2, 3, 0, 4])


def test_similarity_works_on_str_of_tuples():
    # str((1, 2)) = "(1, 2)" vs str((1, 3)) = "(1, 3)": 2 * 5 / 12 = 0.833.
    groups = [0, 0, 0]
    anchors = [(1, 2), (1, 3), (1, 2)]
    assert same_partition(similarity_step_groups(groups, anchors, 0.8), [0, 0, 0])
    assert same_partition(similarity_step_groups(groups, anchors, 0.9), [0, 1, 0])


def test_gigpo_with_similarity_groups_by_hand():
    # One group, two one-step episodes with near-identical anchors (ratio 0.9) and returns 1 and 0.
    # Mean mode: episode level +0.5 / -0.5; step level: the two steps pool -> +0.5 / -0.5 -> totals +1 / -1.
    # With exact grouping each step is alone -> step level 0 -> totals +0.5 / -0.5.
    anchors = ["abcdefghij", "abcdefghiX"]
    rewards, episodes, groups = np.array([1.0, 0.0]), np.array([0, 1]), np.array([0, 0])
    similar = similarity_step_groups(groups, anchors, 0.9)
    np.testing.assert_allclose(gigpo_advantages(rewards, episodes, groups, similar, mode="mean"), [1.0, -1.0])
    exact = factorize(anchors)
    np.testing.assert_allclose(gigpo_advantages(rewards, episodes, groups, exact, mode="mean"), [0.5, -0.5])


def test_similarity_threshold_is_validated():
    with pytest.raises(ValueError, match="similarity_threshold must be in"):
        similarity_step_groups([0], ["a"], 0.0)


def test_factorize_steps_by_hand():
    # Episodes of 2 and 1 steps in groups "a", "a" -> group ids [0, 0, 0]; a third episode in "b" -> 1.
    episodes, groups, anchors = factorize_steps(["a", "a", "b"], [2, 1, 1], [(0, 1), (0, 2), (0, 1), (0, 1)])
    np.testing.assert_array_equal(episodes, [0, 0, 1, 2])
    np.testing.assert_array_equal(groups, [0, 0, 0, 1])
    np.testing.assert_array_equal(anchors, [0, 1, 0, 0])


def test_dense_ids_sparse_keys_use_the_sort_path():
    # Values too large for a lookup table still give a correct partition.
    big = np.array([10**12, 5, 10**12, 5])
    assert same_partition(dense_ids(big, np.array([1, 1, 1, 2])), [0, 1, 0, 2])


# --- invariants -------------------------------------------------------------------------------------------

episode_lengths = st.lists(st.integers(1, 6), min_size=1, max_size=12)


@st.composite
def flat_steps(draw):
    """Random flat steps: episodes of 1-6 steps, in up to 4 groups, small-alphabet anchors, rewards."""
    lengths = draw(episode_lengths)
    n = sum(lengths)
    groups_of_episodes = draw(st.lists(st.integers(0, 3), min_size=len(lengths), max_size=len(lengths)))
    episode_index = np.repeat(np.arange(len(lengths)), lengths)
    group_index = factorize(np.array(groups_of_episodes)[episode_index].tolist())
    rewards = np.array(draw(st.lists(st.sampled_from([0.0, 1.0, -0.1, 0.5]), min_size=n, max_size=n)))
    anchors = draw(st.lists(st.sampled_from(["aaaa", "aaab", "abab", "bbbb", "cccc"]), min_size=n, max_size=n))
    return rewards, episode_index, group_index, anchors


@settings(max_examples=60, deadline=None)
@given(flat_steps())
def test_mean_normalized_group_advantages_sum_to_zero_per_group(data):
    rewards, episodes, groups, anchors = data
    per_episode = grpo_advantages(rewards, episodes, groups, "mean")
    first_steps = np.unique(episodes, return_index=True)[1]
    episode_group = groups[first_steps]
    sums = np.bincount(episode_group, weights=per_episode[first_steps])
    np.testing.assert_allclose(sums, 0.0, atol=1e-9)
    # GiGPO's step-level part sums to zero within every step group.
    anchor_ids = factorize(anchors)
    step_part = gigpo_advantages(rewards, episodes, groups, anchor_ids, gamma=0.9, mode="mean") - per_episode
    np.testing.assert_allclose(np.bincount(step_groups(groups, anchor_ids), weights=step_part), 0.0, atol=1e-9)


@settings(max_examples=60, deadline=None)
@given(flat_steps())
def test_std_normalized_groups_have_unit_std(data):
    rewards, episodes, groups, _ = data
    values = np.asarray(rewards)
    z = group_normalize(values, groups, "std", eps=0.0)
    for g in np.unique(groups):
        x = values[groups == g]
        if len(x) > 1 and np.ptp(x) > 0:
            assert np.std(z[groups == g], ddof=1) == pytest.approx(1.0)


@settings(max_examples=60, deadline=None)
@given(flat_steps(), st.floats(0.05, 1.0))
def test_identical_anchors_in_a_group_share_a_step_group(data, threshold):
    _, _, groups, anchors = data
    for ids in (step_groups(groups, factorize(anchors)), similarity_step_groups(groups, anchors, threshold)):
        seen: dict = {}
        for g, anchor, step_group in zip(groups.tolist(), anchors, ids.tolist(), strict=True):
            assert seen.setdefault((g, anchor), step_group) == step_group
        # ... and a step group never spans two episode groups.
        assert all(len(set(groups[ids == s].tolist())) == 1 for s in np.unique(ids))


@settings(max_examples=60, deadline=None)
@given(flat_steps())
def test_rloo_baseline_is_the_mean_of_the_others(data):
    rewards, episodes, groups, _ = data
    adv = rloo_advantages(rewards, episodes, groups)
    returns = np.bincount(episodes, weights=rewards)
    episode_group = groups[np.unique(episodes, return_index=True)[1]]
    for e, ret in enumerate(returns):
        others = [returns[j] for j in range(len(returns)) if j != e and episode_group[j] == episode_group[e]]
        expected = ret - np.mean(others) if others else 0.0
        np.testing.assert_allclose(adv[episodes == e], expected, atol=1e-9)


@settings(max_examples=60, deadline=None)
@given(flat_steps(), st.floats(0.0, 1.0))
def test_gae_lambda_one_is_returns_minus_values_and_lambda_zero_is_td_error(data, gamma):
    rewards, episodes, _, _ = data
    values = np.linspace(-1.0, 1.0, len(rewards))
    adv, targets = gae_advantages(rewards, values, episodes, gamma=gamma, lam=1.0)
    np.testing.assert_allclose(adv, discounted_returns(rewards, episodes, gamma) - values, atol=1e-9)
    np.testing.assert_allclose(targets, discounted_returns(rewards, episodes, gamma), atol=1e-9)
    td, _ = gae_advantages(rewards, values, episodes, gamma=gamma, lam=0.0)
    last = np.append(episodes[1:] != episodes[:-1], True)
    next_values = np.where(last, 0.0, np.append(values[1:], 0.0))
    np.testing.assert_allclose(td, rewards + gamma * next_values - values, atol=1e-9)


@settings(max_examples=60, deadline=None)
@given(flat_steps(), st.floats(0.0, 1.0))
def test_discounted_returns_match_a_python_loop(data, gamma):
    rewards, episodes, _, _ = data
    expected = np.zeros(len(rewards))
    running = 0.0
    for i in range(len(rewards) - 1, -1, -1):
        if i == len(rewards) - 1 or episodes[i + 1] != episodes[i]:
            running = 0.0
        running = rewards[i] + gamma * running
        expected[i] = running
    np.testing.assert_allclose(discounted_returns(rewards, episodes, gamma), expected, atol=1e-9)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 10**15)), min_size=1, max_size=40))
def test_dense_ids_partition_like_a_dict(rows):
    a, b = (np.array(column) for column in zip(*rows, strict=True))
    assert same_partition(dense_ids(a, b), factorize(rows))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=6), st.floats(0.0, 1.0))
def test_reinforce_pp_whitened_over_tokens_and_constant_within_a_row_without_kl(lengths, step_return):
    width = max(lengths)
    mask = np.array([[1] * k + [0] * (width - k) for k in lengths])
    step_returns = step_return * np.arange(len(lengths))
    adv, returns = reinforce_pp_advantages(step_returns, np.ones(mask.shape), mask, kl_coeff=0.0)
    np.testing.assert_allclose(returns, step_returns[:, None] * mask)  # no KL, token_gamma 1: step return
    assert abs(adv[mask == 1].mean()) < 1e-6
    assert np.all(adv[mask == 0] == 0)


def test_uninformative_group_fraction_counts_groups_whose_advantages_are_all_zero():
    from rllib_llm.algorithms.advantages import uninformative_group_fraction

    # Groups 0 and 2 have a nonzero advantage somewhere; group 1 is all zeros (up to atol); group 3 is absent.
    advantages = np.array([0.5, -0.5, 0.0, 1e-9, 0.0, 0.2, 0.3])
    groups = np.array([0, 0, 1, 1, 2, 2, 4])
    assert uninformative_group_fraction(advantages, groups) == 1 / 4
    assert uninformative_group_fraction(np.zeros(3), np.array([0, 1, 1])) == 1.0
    assert uninformative_group_fraction(np.array([]), np.array([], dtype=np.int64)) == 0.0


def test_gigpo_step_groups_across_episode_groups_by_hand():
    # Two groups of two one-step episodes; anchors A=0, B=1. Group 0: A returns 1, B returns 0; group 1: A 0, B 1.
    # Mean mode, episode level: group 0 +0.5 / -0.5, group 1 -0.5 / +0.5.
    # Exact (within a group): every anchor is alone in its group -> step level 0 -> totals = episode level.
    # Across groups: A pools returns {1, 0} -> +0.5 / -0.5, B pools {0, 1} -> -0.5 / +0.5 -> totals +-1.
    rewards, episodes = np.array([1.0, 0.0, 0.0, 1.0]), np.arange(4)
    groups, anchors = np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1])
    exact = gigpo_advantages(rewards, episodes, groups, anchors, mode="mean")
    np.testing.assert_allclose(exact, [0.5, -0.5, -0.5, 0.5])
    across = gigpo_advantages(rewards, episodes, groups, anchors, mode="mean", across_groups=True)
    np.testing.assert_allclose(across, [1.0, -1.0, -1.0, 1.0])


def test_the_gigpo_estimator_pools_across_groups_only_when_configured():
    from types import SimpleNamespace

    from rllib_llm.algorithms.config import LLMConfig
    from rllib_llm.algorithms.learner_connectors import ADVANTAGE_ESTIMATORS
    from rllib_llm.columns import ANCHOR_INDEX, EPISODE_INDEX, GROUP_INDEX, REWARDS

    steps = {REWARDS: np.array([1.0, 0.0, 0.0, 1.0]), EPISODE_INDEX: np.arange(4),
             GROUP_INDEX: np.array([0, 0, 1, 1]), ANCHOR_INDEX: np.array([0, 1, 0, 1])}
    config = SimpleNamespace(gamma=0.95, step_advantage_weight=1.0, advantage_norm="mean", step_grouping="exact",
                             group_stats_over_steps=False)
    estimator = ADVANTAGE_ESTIMATORS["gigpo"]
    np.testing.assert_allclose(estimator(steps, config), [0.5, -0.5, -0.5, 0.5])
    config.step_grouping = "exact_across_groups"
    np.testing.assert_allclose(estimator(steps, config), [1.0, -1.0, -1.0, 1.0])
    LLMConfig().environment("NumberLine").training(step_grouping="exact_across_groups").validate()  # a valid choice

"""Advantage estimators as small pure numpy functions over flat per-step arrays.

Conventions shared by every estimator (what :class:`~rllib_llm.algorithms.learner_connectors.FlattenSteps`
produces): one entry per env step; ``episode_index`` numbers episodes 0..E-1 and each episode's steps are
contiguous and in time order; ``group_index`` (per step) numbers the groups of episodes that started from
the same initial state; ``anchor_index`` (per step) numbers distinct anchor states.

Everything is vectorized with ``np.bincount`` / one sort, so the cost is O(n log n) at worst and a million
steps take well under a second (``benchmarks/advantages_scale.py``).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from difflib import SequenceMatcher

import numpy as np

NORM_MODES = ("std", "mean")
#: GiGPO step groups: identical anchors within an episode group (the paper's), similar anchors within one
#: (verl-agent's similarity GiGPO), or identical anchors across every episode group of the batch (for envs
#: whose anchor is the whole state: a state met from several start states is compared across all of them).
STEP_GROUPINGS = ("exact", "similarity", "exact_across_groups")


def _check_mode(mode: str) -> None:
    if mode not in NORM_MODES:
        raise ValueError(f"advantage normalization must be one of {NORM_MODES}, got {mode!r}")


def _ints(values: Iterable) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


def _floats(values: Iterable) -> np.ndarray:
    return np.asarray(values, dtype=np.float64)


# --- building blocks ---------------------------------------------------------------------------------


def group_normalize(values: np.ndarray, group_index: np.ndarray, mode: str = "std", eps: float = 1e-6) -> np.ndarray:
    """Per-group ``(x - mean) / (std + eps)`` (``mode="std"``) or ``x - mean`` (``mode="mean"``).

    ``std`` is the unbiased sample std, as ``torch.std`` in verl-agent; a group of one gets advantage 0
    (verl-agent keeps such a lone score unnormalized; with one sample there is no baseline, so we use 0).
    """
    _check_mode(mode)
    values = _floats(values)
    group_index = _ints(group_index)
    counts = np.bincount(group_index)
    means = np.bincount(group_index, weights=values, minlength=len(counts)) / np.maximum(counts, 1)
    centered = values - means[group_index]
    if mode == "mean":
        return centered
    squares = np.bincount(group_index, weights=centered**2, minlength=len(counts))
    std = np.sqrt(squares / np.maximum(counts - 1, 1))
    std[(counts <= 1) | (std == 0)] = 1.0  # a lone or constant group: centered values are 0 anyway
    return centered / (std[group_index] + eps)


def batch_normalize(values: np.ndarray, mode: str = "std", eps: float = 1e-6) -> np.ndarray:
    """:func:`group_normalize` with the whole batch as one group (PPO's advantage whitening)."""
    values = _floats(values)
    return group_normalize(values, np.zeros(len(values), dtype=np.int64), mode, eps)


def step_positions(episode_index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(time step of each entry within its episode, length of each episode), for contiguous episodes."""
    episode_index = _ints(episode_index)
    lengths = np.bincount(episode_index)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    return np.arange(len(episode_index)) - starts[episode_index], lengths


def steps_to_go(episode_index: np.ndarray) -> np.ndarray:
    """How many steps of its episode follow each entry (0 for an episode's last step)."""
    episode_index = _ints(episode_index)
    t, lengths = step_positions(episode_index)
    return lengths[episode_index] - 1 - t


def discounted_cumsum(values: np.ndarray, episode_index: np.ndarray, discount: float) -> np.ndarray:
    """Per step ``y_t = x_t + discount * y_{t+1}`` within each episode (``y`` after the last step is 0).

    A doubling scan (Hillis-Steele): pass j adds ``discount^(2^j)`` times the partial sum ``2^j`` steps
    ahead, for the steps at least that far from their episode's end. ``ceil(log2(longest episode))``
    vectorized passes: O(n log T) work and O(n) memory whatever the mix of episode lengths.
    """
    out = _floats(values).copy()
    to_go = steps_to_go(episode_index)
    shift, factor = 1, float(discount)
    longest = int(to_go.max(initial=0))
    while shift <= longest:
        # Contiguous whole-array ops (no gathers); the right side is computed before the in-place add.
        out[:-shift] += np.where(to_go[:-shift] >= shift, factor * out[shift:], 0.0)
        shift, factor = 2 * shift, factor * factor
    return out


def discounted_returns(rewards: np.ndarray, episode_index: np.ndarray, gamma: float) -> np.ndarray:
    """Per step ``G_t = r_t + gamma * G_{t+1}`` within each episode (0 after its last step)."""
    return discounted_cumsum(rewards, episode_index, gamma)


def episode_returns(rewards: np.ndarray, episode_index: np.ndarray) -> np.ndarray:
    """Undiscounted return of each episode."""
    return np.bincount(_ints(episode_index), weights=_floats(rewards))


def episode_groups(episode_index: np.ndarray, group_index: np.ndarray) -> np.ndarray:
    """The group of each episode, from per-step arrays."""
    episode_index = _ints(episode_index)
    groups = np.zeros(int(episode_index.max(initial=-1)) + 1, dtype=np.int64)
    groups[episode_index] = group_index
    return groups


def factorize(keys: Sequence[Hashable]) -> np.ndarray:
    """Dense integer ids for hashable keys, in order of first appearance.

    ``dict.fromkeys`` and ``map`` keep the per-key work in C: about 3x faster than a Python loop.
    """
    ids = dict.fromkeys(keys)
    for i, key in enumerate(ids):
        ids[key] = i
    return np.fromiter(map(ids.__getitem__, keys), dtype=np.int64, count=len(keys))


def dense_ids(*columns: np.ndarray) -> np.ndarray:
    """Dense ids of the rows of non-negative integer ``columns``: equal rows get equal ids.

    The rows are packed into one int64 key; when the key range is at most a few times the number of rows
    a lookup table makes this O(n), otherwise one 1-D ``np.unique`` (a sort) does.
    """
    n = len(columns[0])
    key = np.zeros(n, dtype=np.int64)
    key_range = 1
    for column in columns:
        column = _ints(column)
        width = int(column.max(initial=0)) + 1
        if key_range > np.iinfo(np.int64).max // width:  # re-densify before the packed key could overflow
            key = np.unique(key, return_inverse=True)[1].reshape(-1)
            key_range = int(key.max(initial=0)) + 1
        key = key * width + column
        key_range *= width
    if key_range <= 4 * n + 1024:
        present = np.zeros(key_range, dtype=bool)
        present[key] = True
        return (np.cumsum(present) - 1)[key]
    return np.unique(key, return_inverse=True)[1].reshape(-1)


def factorize_steps(
    episode_group_ids: Sequence[Hashable], episode_lengths: Sequence[int], anchors: Sequence[Hashable]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(episode_index, group_index, anchor_index) per step from Python objects: group ids are given per
    episode (factorized E times, not n), anchors per step (one O(n) hashing pass)."""
    lengths = _ints(episode_lengths)
    episode_index = np.repeat(np.arange(len(lengths)), lengths)
    return episode_index, factorize(episode_group_ids)[episode_index], factorize(anchors)


def uninformative_group_fraction(advantages: np.ndarray, group_index: np.ndarray, atol: float = 1e-6) -> float:
    """The share of episode groups whose steps all have advantage ~0: groups that teach nothing (every
    episode and every anchor state of the group scored alike, DAPO's "zero-variance" groups). When it nears
    1 the policy has stopped exploring: every rollout of a start state plays out the same."""
    group_index = _ints(group_index)
    if len(group_index) == 0:
        return 0.0
    informative = np.bincount(group_index, weights=(np.abs(_floats(advantages)) > atol).astype(np.float64))
    present = np.bincount(group_index) > 0
    return float(np.mean(informative[present] == 0))


# --- step groups (GiGPO) ------------------------------------------------------------------------------


def step_groups(group_index: np.ndarray, anchor_index: np.ndarray) -> np.ndarray:
    """GiGPO's step-level groups: steps in the same episode group whose anchor states are identical."""
    return dense_ids(group_index, anchor_index)


def similarity_step_groups(group_index: np.ndarray, anchors: Sequence[Hashable], threshold: float = 0.9) -> np.ndarray:
    """Step groups for envs whose states rarely repeat exactly (e.g. search): similar anchors share a group.

    Within each episode group, distinct anchors are clustered greedily in order of first appearance (as in
    verl-agent's similarity GiGPO): an anchor joins the first cluster whose leader (first member) has
    ``SequenceMatcher(None, str(anchor), str(leader)).ratio() >= threshold``, else it leads a new cluster.
    Only anchors of the same group are compared, each distinct anchor once, and the cheap upper bounds
    ``real_quick_ratio``/``quick_ratio`` reject most pairs before the full ratio. Identical anchors always
    share a cluster.
    """
    if not 0 < threshold <= 1:
        raise ValueError(f"similarity_threshold must be in (0, 1], got {threshold!r}")
    group_index = _ints(group_index)
    pair_ids = factorize(list(zip(group_index.tolist(), anchors, strict=True)))  # exact duplicates first, O(n)
    first_rows = np.unique(pair_ids, return_index=True)[1]
    cluster_of_pair = np.empty(len(first_rows), dtype=np.int64)
    leaders: dict[int, list[tuple[SequenceMatcher, int]]] = {}
    num_clusters = 0
    for pair, row in enumerate(first_rows):
        text = str(anchors[row])
        group_leaders = leaders.setdefault(int(group_index[row]), [])
        for matcher, cluster in group_leaders:
            matcher.set_seq1(text)
            if matcher.real_quick_ratio() >= threshold and matcher.quick_ratio() >= threshold and matcher.ratio() >= threshold:
                cluster_of_pair[pair] = cluster
                break
        else:
            group_leaders.append((SequenceMatcher(None, text, text), num_clusters))  # seq2 = leader, analysed once
            cluster_of_pair[pair] = num_clusters
            num_clusters += 1
    return cluster_of_pair[pair_ids]


# --- estimators ---------------------------------------------------------------------------------------


def grpo_advantages(
    rewards: np.ndarray,
    episode_index: np.ndarray,
    group_index: np.ndarray,
    mode: str = "std",
    eps: float = 1e-6,
    over_steps: bool = False,
    row_offset: np.ndarray | None = None,
) -> np.ndarray:
    """GRPO: each episode's return normalized within its group, broadcast to all of its steps.

    ``over_steps=True`` takes the group mean/std over steps instead of episodes (each episode counted once
    per step, so long episodes weigh more): verl-agent's ``compute_mean_std_cross_all_data=True``.
    ``row_offset`` (with ``over_steps``) is added to each step row's score before the normalization:
    verl-agent's invalid-action penalty, subtracted from the invalid step's own row only.
    """
    episode_index = _ints(episode_index)
    returns = episode_returns(rewards, episode_index)
    if over_steps:
        return group_normalize(_offset(returns[episode_index], row_offset), group_index, mode, eps)
    _no_offset_without_rows(row_offset)
    return group_normalize(returns, episode_groups(episode_index, group_index), mode, eps)[episode_index]


def _offset(scores: np.ndarray, row_offset: np.ndarray | None) -> np.ndarray:
    return scores if row_offset is None else scores + _floats(row_offset)


def _no_offset_without_rows(row_offset: np.ndarray | None) -> None:
    if row_offset is not None:
        raise ValueError("row_offset is a per-step-row score term: it needs over_steps=True")


def leave_one_out(values: np.ndarray, group_index: np.ndarray) -> np.ndarray:
    """Each value minus the mean of the *other* values of its group (0 for a group of one): ``n / (n - 1) *
    (x_i - mean(x))`` for a group of ``n`` (Kool et al. 2019, eq. 5; Ahmadian et al. 2024)."""
    groups = _ints(group_index)
    counts = np.bincount(groups)[groups]
    totals = np.bincount(groups, weights=values)[groups]
    baseline = (totals - values) / np.maximum(counts - 1, 1)
    return np.where(counts > 1, values - baseline, 0.0)


def rloo_advantages(
    rewards: np.ndarray,
    episode_index: np.ndarray,
    group_index: np.ndarray,
    over_steps: bool = False,
    row_offset: np.ndarray | None = None,
) -> np.ndarray:
    """RLOO: episode return minus the mean return of the *other* episodes of its group (0 for a lone one),
    broadcast to the episode's steps.

    ``over_steps=True`` leaves one *row* out instead: each step row carries its episode's return and the
    baseline is the mean over the group's other rows, the episode's own other steps included (verl-agent's
    ``compute_rloo_outcome_advantage`` on step rows; long episodes weigh more), and ``row_offset`` is added
    to each row's score first (as in :func:`grpo_advantages`).
    """
    episode_index = _ints(episode_index)
    returns = episode_returns(rewards, episode_index)
    if over_steps:
        return leave_one_out(_offset(returns[episode_index], row_offset), group_index)
    _no_offset_without_rows(row_offset)
    return leave_one_out(returns, episode_groups(episode_index, group_index))[episode_index]


def gigpo_advantages(
    rewards: np.ndarray,
    episode_index: np.ndarray,
    group_index: np.ndarray,
    anchor_index: np.ndarray,
    gamma: float = 0.95,
    omega: float = 1.0,
    mode: str = "std",
    eps: float = 1e-6,
    over_steps: bool = False,
    across_groups: bool = False,
    row_offset: np.ndarray | None = None,
) -> np.ndarray:
    """GiGPO: episode-level group advantage + ``omega`` x step-level advantage (paper eqs. 3-8).

    The step-level part normalizes each step's discounted return within its anchor-state group (steps of
    the group's trajectories that saw the same anchor observation). For similarity grouping pass the
    cluster ids of :func:`similarity_step_groups` as ``anchor_index``. ``across_groups`` pools identical
    anchors of every episode group (valid when an anchor is the env's whole state, so equal anchors are the
    same decision whatever the start state); the episode level stays per group. ``row_offset`` (with
    ``over_steps``) is added to each row's episode-level score and to its discounted step return, after the
    discounting (verl-agent's invalid-action penalty on ``token_level_scores`` and ``step_rewards``).
    """
    episode_level = grpo_advantages(rewards, episode_index, group_index, mode, eps, over_steps, row_offset)
    returns = _offset(discounted_returns(rewards, episode_index, gamma), row_offset)
    anchor_groups = dense_ids(anchor_index) if across_groups else step_groups(group_index, anchor_index)
    step_level = group_normalize(returns, anchor_groups, mode, eps)
    return episode_level + omega * step_level


def gae_advantages(
    rewards: np.ndarray, values: np.ndarray, episode_index: np.ndarray, gamma: float = 0.99, lam: float = 0.95
) -> tuple[np.ndarray, np.ndarray]:
    """Generalized advantage estimation over the env steps of each episode: (advantages, value targets).

    ``delta_t = r_t + gamma * V_{t+1} - V_t`` and ``A_t = delta_t + gamma * lam * A_{t+1}``; the value after
    an episode's last step is 0 (also for truncated episodes: their final observation is never prompted,
    so it has no value estimate). Value targets are ``A_t + V_t``.
    """
    rewards, values = _floats(rewards), _floats(values)
    next_values = np.append(values[1:], 0.0)
    next_values[steps_to_go(episode_index) == 0] = 0.0
    deltas = rewards + gamma * next_values - values
    advantages = discounted_cumsum(deltas, episode_index, gamma * lam)
    return advantages, advantages + values


def masked_whiten(values: np.ndarray, mask: np.ndarray, eps: float = 1e-8) -> np.ndarray:
    """``(x - mean) / sqrt(var + eps)`` over the masked entries (unbiased var), 0 elsewhere, as verl."""
    values, mask = _floats(values), _floats(mask)
    count = mask.sum()
    mean = (values * mask).sum() / max(count, 1.0)
    var = (((values - mean) ** 2) * mask).sum() / max(count - 1, 1.0)
    return (values - mean) / np.sqrt(var + eps) * mask


def reinforce_pp_advantages(
    step_returns: np.ndarray, kl: np.ndarray, mask: np.ndarray, kl_coeff: float, token_gamma: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """REINFORCE++ over response tokens [N, R]: (whitened advantages, token returns).

    Token rewards are ``-kl_coeff * kl`` on every response token plus the step's (discounted env) return on
    its last token; token returns are their discounted sum to the end of the response, whitened over all
    response tokens of the batch (verl's ``compute_reinforce_plus_plus_outcome_advantage``).
    """
    mask = _floats(mask)
    token_rewards = -kl_coeff * _floats(kl) * mask
    lengths = mask.sum(axis=1).astype(np.int64)
    rows = np.flatnonzero(lengths > 0)
    token_rewards[rows, lengths[rows] - 1] += _floats(step_returns)[rows]
    returns = np.zeros_like(token_rewards)
    running = np.zeros(len(token_rewards))
    for t in range(token_rewards.shape[1] - 1, -1, -1):
        running = (token_rewards[:, t] + token_gamma * running) * mask[:, t]
        returns[:, t] = running
    return masked_whiten(returns, mask), returns

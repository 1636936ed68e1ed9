"""Asynchronous group rollouts: the EnvRunners never wait for the Learner.

RLlib's IMPALA/APPO pattern on the new API stack: every remote EnvRunner always has one ``sample()`` in
flight (``EnvRunnerGroup.foreach_env_runner_async_fetch_ready``), finished rollouts go into a queue of whole
groups, the Learner updates as soon as one iteration's worth of groups is there, and every ``broadcast_interval``
updates the new weights, tagged with the Learner's ``weights_seq_no``, go to RLlib's ``EnvRunnerStateServer``,
from which each EnvRunner pulls the newest at the start of its next rollout (IMPALA/APPO's pull-based sync).
A rollout that is running when new weights arrive finishes on the version it started with, and every episode
records that version (:data:`~rllib_llm.columns.POLICY_VERSION`): a group never mixes versions. One rollout
may feed several updates (``updates_per_rollout``).

A group's *staleness* is how many Learner updates happened since the weights it was sampled with; groups
more than ``max_staleness`` old are dropped (and counted) when the Learner takes its batch; with DAPO's
dynamic sampling, groups whose returns are all equal are filtered as they arrive (and counted). The loss
corrects for the rest (``off_policy_correction``, :func:`~rllib_llm.algorithms.losses.behaviour_weights`).
The queue below is pure bookkeeping, tested without Ray.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rllib_llm.algorithms.dynamic_sampling import group_episodes
from rllib_llm.algorithms.settings import Setting, choice, declare, declare_rule, flag, number
from rllib_llm.columns import GROUP_ID, POLICY_VERSION

#: off_policy_correction values.
OFF_POLICY_CORRECTIONS = ("decoupled", "none")

declare(
    __name__,
    Setting("async_rollouts", False, "EnvRunners keep playing group rollouts with the weights they have while "
            "the Learner updates on the complete groups that arrived (needs num_env_runners >= 1; single-agent; "
            "notes/async.md).", flag()),
    Setting("max_staleness", 1, "A group sampled with weights more than this many Learner updates old is dropped "
            "(and counted).", number(0, integer=True)),
    Setting("broadcast_interval", 1, "Learner updates between weight broadcasts to the EnvRunners (APPO's "
            "name).", number(1, integer=True)),
    Setting("updates_per_rollout", 1, "Learner updates one EnvRunner rollout feeds: each sample() plays "
            "num_groups x this many groups and the queue hands them to the next updates (APPO's rollout fragment "
            "vs train batch). In steady state a rollout's groups are trained k to 2k - 1 updates after its "
            "weights, so max_staleness must be >= 2k - 1.", number(1, integer=True)),
    Setting("off_policy_correction", "decoupled", "How stale groups are corrected: 'decoupled' (PPO clipped "
            "against the Learner's policy before the update, each token weighted by min(pi_prox / mu, "
            "behaviour_weight_cap); one extra no-grad forward pass per update) or 'none' (the ratio against the "
            "behaviour log-probs, as in lock-step training).", choice(OFF_POLICY_CORRECTIONS)),
    Setting("behaviour_weight_cap", 2.0, "The truncation of the decoupled objective's behaviour weights "
            "(V-trace's rho-bar).", number(1)),
)


def _async_rules(config: Any) -> list[str]:
    errors = []
    if config.async_rollouts is True:
        if config.is_multi_agent:
            errors.append("async_rollouts=True is single-agent only for now")
        if not (config.merge_env_runner_states is False and config.broadcast_env_runner_states is False):
            errors.append("async_rollouts=True: set .env_runners(merge_env_runner_states=False, broadcast_env_runner_"
                          "states=False) (.training(async_rollouts=True) does): RLlib's connector-state sync would "
                          "wait for every rollout in flight")
    k = config.updates_per_rollout
    if isinstance(k, int) and not isinstance(k, bool) and k > 1:
        if config.async_rollouts is not True:
            errors.append(f"updates_per_rollout={k} needs async_rollouts=True (a lock-step update trains on its "
                          "whole rollout)")
        if isinstance(config.max_staleness, int) and config.max_staleness < 2 * k - 1:
            errors.append(f"updates_per_rollout={k} trains a rollout's groups up to {2 * k - 1} updates after their "
                          f"weights: set max_staleness >= {2 * k - 1} (got {config.max_staleness}), or every "
                          "rollout's tail is dropped")
    return errors


declare_rule(__name__, _async_rules)

#: Metric names (logged under the Algorithm's ``async_rollouts`` result key).
STALENESS_MEAN = "staleness_mean"
STALENESS_MAX = "staleness_max"
GROUPS_DROPPED = "groups_dropped"
GROUPS_QUEUED = "groups_queued"
GROUPS_FILTERED = "groups_filtered"


def group_version(group: list) -> int:
    """The policy version every episode of ``group`` was sampled with; a ValueError if they differ (one
    ``sample()`` plays a whole group with one set of weights, so a mix means a bug upstream)."""
    versions = {int(episode.custom_data.get(POLICY_VERSION, 0)) for episode in group}
    if len(versions) != 1:
        raise ValueError(
            f"Group {group[0].custom_data.get(GROUP_ID)!r} mixes policy versions {sorted(versions)}; a group "
            "must be sampled with one set of weights."
        )
    return versions.pop()


@dataclass
class GroupQueue:
    """Complete groups waiting for the Learner, oldest first, with the version each was sampled with."""

    max_staleness: int
    #: Which groups to keep at all (DAPO's dynamic sampling: ``is_informative``); None keeps every group.
    keep: Callable[[list], bool] | None = None
    groups: deque = field(default_factory=deque)
    #: Groups dropped as too stale, and groups ``keep`` refused, since the last :meth:`take`.
    dropped: int = 0
    filtered: int = 0

    def add(self, episodes: list) -> None:
        for group in group_episodes(episodes):
            version = group_version(group)
            if self.keep is not None and not self.keep(group):
                self.filtered += 1
                continue
            self.groups.append((version, group))

    def drop_stale(self, current_version: int) -> None:
        """Removes the groups more than ``max_staleness`` updates older than ``current_version``."""
        kept = deque(item for item in self.groups if current_version - item[0] <= self.max_staleness)
        self.dropped += len(self.groups) - len(kept)
        self.groups = kept

    def __len__(self) -> int:
        return len(self.groups)

    def take(self, num_groups: int, current_version: int) -> tuple[list, dict[str, float]]:
        """The episodes of the ``num_groups`` oldest groups (after dropping the stale ones) and the batch's
        staleness statistics; the dropped count restarts."""
        self.drop_stale(current_version)
        taken = [self.groups.popleft() for _ in range(min(num_groups, len(self.groups)))]
        lags = np.array([current_version - version for version, _ in taken], dtype=np.float64)
        stats = {
            STALENESS_MEAN: float(lags.mean()) if len(lags) else 0.0,
            STALENESS_MAX: float(lags.max()) if len(lags) else 0.0,
            GROUPS_DROPPED: float(self.dropped),
            GROUPS_QUEUED: float(len(self.groups)),
            GROUPS_FILTERED: float(self.filtered),
        }
        self.dropped = self.filtered = 0
        return [episode for _, group in taken for episode in group], stats

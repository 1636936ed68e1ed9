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

import numpy as np

from rllib_llm.algorithms.dynamic_sampling import group_episodes
from rllib_llm.columns import GROUP_ID, POLICY_VERSION

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

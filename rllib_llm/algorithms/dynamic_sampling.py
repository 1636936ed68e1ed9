"""DAPO's dynamic sampling: train only on groups whose episodes did not all get the same return.

A group whose returns are all equal has zero group-relative advantage everywhere, so it only dilutes the
batch. :class:`DynamicSamplingMixin` keeps sampling group rollouts, keeping the informative groups, until
it has as many groups as one rollout brings (``num_groups`` per EnvRunner) or ``max_sampling_rounds``
rollouts were played; then it trains on the first ones (or on fewer, if the cap was hit; no update when
there is none).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rllib_llm.algorithms.settings import Setting, declare, declare_rule, flag, number
from rllib_llm.columns import GROUP_ID

declare(
    __name__,
    Setting("dynamic_sampling", False, "Train only on informative groups, sampling more rollouts until one "
            "rollout's worth of groups is kept (needs a DynamicSamplingMixin algorithm: DAPO, DynamicGiGPO).",
            flag()),
    Setting("max_sampling_rounds", 4, "The most rollouts dynamic sampling plays for one update.",
            number(1, integer=True)),
)


def _needs_the_mixin(config: Any) -> list[str]:
    if config.dynamic_sampling and not (isinstance(config.algo_class, type) and issubclass(config.algo_class,
                                                                                          DynamicSamplingMixin)):
        return ["dynamic_sampling=True needs an algorithm with dynamic sampling (DAPO, DynamicGiGPO), "
                f"not {getattr(config.algo_class, '__name__', config.algo_class)}"]
    return []


declare_rule(__name__, _needs_the_mixin)

#: Returns closer than this count as equal (sums of the same rewards in another order may differ by ulps).
RETURN_TOLERANCE = 1e-9


def group_episodes(episodes: list) -> list[list]:
    """Episodes grouped by their group id, groups in order of first appearance."""
    groups: dict[Any, list] = {}
    for episode in episodes:
        groups.setdefault(episode.custom_data[GROUP_ID], []).append(episode)
    return list(groups.values())


def is_informative(group: list) -> bool:
    """Whether the group's episode returns are not all equal."""
    returns = np.array([episode.get_return() for episode in group], dtype=np.float64)
    return bool(returns.max() - returns.min() > RETURN_TOLERANCE)


def dynamic_sample(sample: Callable[[], list], max_rounds: int) -> tuple[list, dict[str, float]]:
    """Calls ``sample`` until the informative groups fill one round's worth of groups, at most
    ``max_rounds`` times; returns (episodes of the kept groups, stats)."""
    kept: list[list] = []
    target = num_groups = num_informative = rounds = 0
    while rounds < max_rounds:
        groups = group_episodes(sample())
        rounds += 1
        target = target or len(groups)
        informative = [g for g in groups if is_informative(g)]
        num_groups += len(groups)
        num_informative += len(informative)
        kept.extend(informative)
        if len(kept) >= target:
            break
    kept = kept[:target]
    stats = {
        "dynamic_sampling_rounds": float(rounds),
        "informative_group_fraction": num_informative / max(num_groups, 1),
        "num_groups_trained": float(len(kept)),
    }
    return [episode for group in kept for episode in group], stats


class DynamicSamplingMixin:
    """Put before :class:`~rllib_llm.algorithms.algorithm.LLMAlgorithm` in the bases; active when the
    config's ``dynamic_sampling`` is True (DAPO and DynamicGiGPO set it)."""

    def sample_episodes(self) -> list:
        if not self.config.dynamic_sampling:
            return super().sample_episodes()
        episodes, stats = dynamic_sample(super().sample_episodes, self.config.max_sampling_rounds)
        for key, value in stats.items():
            self.metrics.log_value(key, value, window=1)
        return episodes

"""DAPO's dynamic sampling on scripted rollouts: which groups are kept, how often it samples, the cap."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rllib_llm.algorithms.dynamic_sampling import DynamicSamplingMixin, dynamic_sample, group_episodes, is_informative
from rllib_llm.columns import GROUP_ID
from tests.algorithms.conftest import make_episode


def rollout(name: str, returns_per_group: list[list[float]]) -> list:
    """One group rollout: one single-step episode per return, groups named ``{name}-{g}``."""
    return [make_episode(f"{name}-{g}", [r]) for g, returns in enumerate(returns_per_group) for r in returns]


def scripted(*rollouts: list) -> tuple[callable, list[int]]:
    calls = [0]

    def sample() -> list:
        calls[0] += 1
        return rollouts[calls[0] - 1]

    return sample, calls


def group_ids(episodes: list) -> list[str]:
    return list(dict.fromkeys(e.custom_data[GROUP_ID] for e in episodes))


def test_is_informative_and_grouping():
    assert is_informative([make_episode("g", [1.0]), make_episode("g", [0.0])])
    assert not is_informative([make_episode("g", [0.5]), make_episode("g", [0.2, 0.3])])  # both return 0.5
    episodes = rollout("r", [[1, 0], [0, 0]])
    assert [len(g) for g in group_episodes(episodes)] == [2, 2]


def test_keeps_sampling_until_the_batch_has_enough_informative_groups():
    # Rollouts of 3 groups each. Round 1: only group 1 informative; round 2: groups 0 and 2 -> 3 kept, stop.
    sample, calls = scripted(
        rollout("a", [[1, 1], [1, 0], [0, 0]]),
        rollout("b", [[0, 1], [0, 0], [1, 0]]),
        rollout("c", [[1, 0], [1, 0], [1, 0]]),
    )
    episodes, stats = dynamic_sample(sample, max_rounds=5)
    assert calls[0] == 2
    assert group_ids(episodes) == ["a-1", "b-0", "b-2"]
    assert len(episodes) == 6
    assert stats == {"dynamic_sampling_rounds": 2.0, "informative_group_fraction": 3 / 6, "num_groups_trained": 3.0}


def test_trims_to_one_rollouts_worth_of_groups():
    sample, _ = scripted(rollout("a", [[1, 0], [1, 0]]))
    episodes, _ = dynamic_sample(sample, max_rounds=3)
    assert group_ids(episodes) == ["a-0", "a-1"]
    sample, _ = scripted(rollout("a", [[1, 0], [0, 0]]), rollout("b", [[1, 0], [0, 1]]))
    assert group_ids(dynamic_sample(sample, max_rounds=3)[0]) == ["a-0", "b-0"]


def test_stops_at_the_round_cap_with_what_it_has():
    sample, calls = scripted(rollout("a", [[0, 0], [1, 0]]), rollout("b", [[0, 0], [0, 0]]), rollout("c", [[1, 0]] * 2))
    episodes, stats = dynamic_sample(sample, max_rounds=2)
    assert calls[0] == 2
    assert group_ids(episodes) == ["a-1"]
    assert stats["num_groups_trained"] == 1.0
    sample, _ = scripted(rollout("a", [[0, 0]]))
    assert dynamic_sample(sample, max_rounds=1)[0] == []


class Base:
    def __init__(self, rollouts: list, dynamic: bool) -> None:
        self.rollouts = list(rollouts)
        self.config = SimpleNamespace(dynamic_sampling=dynamic, max_sampling_rounds=4)
        self.logged: dict = {}
        self.metrics = SimpleNamespace(log_value=lambda key, value, window=None: self.logged.__setitem__(key, value))

    def sample_episodes(self) -> list:
        return self.rollouts.pop(0)


class Dynamic(DynamicSamplingMixin, Base):
    pass


@pytest.mark.parametrize("dynamic", [True, False])
def test_mixin_overrides_sample_episodes_only_when_enabled(dynamic):
    algo = Dynamic([rollout("a", [[0, 0], [1, 0]]), rollout("b", [[1, 0], [0, 0]])], dynamic)
    episodes = algo.sample_episodes()
    if dynamic:
        assert group_ids(episodes) == ["a-1", "b-0"]
        assert algo.logged["dynamic_sampling_rounds"] == 2.0
    else:
        assert group_ids(episodes) == ["a-0", "a-1"]
        assert algo.logged == {}

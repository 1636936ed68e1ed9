"""Several Learners get whole groups of whole episodes (group baselines need all of a group's returns)."""

from __future__ import annotations

import sys
from collections import Counter

import pytest
from ray.rllib.connectors.connector_v2 import ConnectorV2

from rllib_llm.algorithms.sharding import group_shards, learner_update_data, max_module_steps
from rllib_llm.columns import GROUP_ID
from tests.algorithms.conftest import make_episode
from tests.conftest import tiny_config


def episodes_of(lengths: dict[str, list[int]]) -> list:
    return [make_episode(g, [0.0] * n) for g, ns in lengths.items() for n in ns]


def test_groups_stay_whole_and_shards_are_balanced_by_steps():
    episodes = episodes_of({"a": [5, 5], "b": [1, 1], "c": [3, 3], "d": [2, 2]})
    shards = group_shards(episodes, 2)
    # Largest group first, each to the lighter shard: a (10 steps) -> 0; c (6) -> 1; d (4) -> 1 (6 < 10);
    # b (2) -> 0 (a tie at 10: the first).
    assert [sorted({ep.custom_data[GROUP_ID] for ep in shard}) for shard in shards] == [["a", "b"], ["c", "d"]]
    assert [sum(len(ep) for ep in shard) for shard in shards] == [12, 10]
    assert sorted(id(ep) for shard in shards for ep in shard) == sorted(map(id, episodes))  # nothing lost


def test_too_few_groups_for_the_learners_is_an_error_naming_both_counts():
    with pytest.raises(ValueError, match="1 group\\(s\\) for 2 Learners"):
        group_shards(episodes_of({"a": [1, 1]}), 2)


def test_one_learner_gets_the_episodes_as_they_are():
    episodes = episodes_of({"a": [1, 2]})
    assert learner_update_data(episodes, 1, 8, 1) == {"episodes": episodes}
    assert learner_update_data(episodes, 0, 8, 1) == {"episodes": episodes}
    assert max_module_steps(episodes) == 3


class RequireWholeGroups(ConnectorV2):
    """Fails the update if this Learner got part of a group or a slice of an episode."""

    def __call__(self, *, rl_module, batch, episodes, explore=None, shared_data=None, metrics=None, **kwargs):
        sizes = Counter(ep.custom_data[GROUP_ID] for ep in episodes)
        if set(sizes.values()) != {2} or not all(ep.is_done for ep in episodes):
            raise AssertionError(f"partial groups or episodes reached a Learner: {dict(sizes)}")
        return batch


@pytest.mark.usefixtures("ray_session")
def test_two_learners_train_on_whole_groups():
    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the Learner actors cannot import tests/
    config = (
        tiny_config(group_size=2, num_groups=4)
        .learners(num_learners=2, num_cpus_per_learner=0.5)
        .training(learner_connector=lambda obs, act: RequireWholeGroups(), minibatch_size=4)
    )
    algo = config.build_algo()
    try:
        for _ in range(2):
            result = algo.train()
        assert "policy_loss" in result["learners"]["default_policy"]
    finally:
        algo.stop()


def test_config_refuses_more_learners_than_groups_per_iteration():
    with pytest.raises(ValueError, match="num_learners=3 needs at least as many groups per iteration, got 2"):
        tiny_config(num_groups=2).learners(num_learners=3).validate()
    tiny_config(num_groups=1).learners(num_learners=2).env_runners(num_env_runners=2).validate()  # 2 x 1: fine


def test_an_update_with_fewer_groups_than_learners_is_skipped_with_a_warning(monkeypatch, caplog):
    """Dynamic sampling may keep fewer groups than there are Learners: skip that update, say so."""
    from types import SimpleNamespace

    from rllib_llm.algorithms.algorithm import LLMAlgorithm

    fake = SimpleNamespace(
        config=SimpleNamespace(num_learners=2, minibatch_size=4, num_epochs=1, async_rollouts=False),
        iteration=4,
        sample_episodes=lambda: episodes_of({"a": [1, 1]}),
        learner_group=SimpleNamespace(update=lambda **kw: pytest.fail("no update expected")),
        _broadcast_weights=lambda: pytest.fail("no weight sync expected after a skipped update"),
        _evaluate_held_out_if_due=lambda: None,
    )
    fake._update = lambda episodes: LLMAlgorithm._update(fake, episodes)
    LLMAlgorithm.training_step(fake)
    assert any("Update skipped in iteration 5: 1 group(s) for 2 Learners" in r.message for r in caplog.records)

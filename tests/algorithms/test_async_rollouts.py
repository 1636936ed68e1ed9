"""Asynchronous rollouts: the group queue's staleness rules, the decoupled objective's behaviour weights by
hand, and a tiny-model run where a remote EnvRunner samples while the Learner updates."""

from __future__ import annotations

import numpy as np
import pytest
import ray
import torch
from ray.rllib.env.single_agent_episode import SingleAgentEpisode

from rllib_llm.algorithms.async_rollouts import (
    GROUPS_DROPPED,
    STALENESS_MAX,
    STALENESS_MEAN,
    GroupQueue,
    group_version,
)
from rllib_llm.algorithms.losses import behaviour_weights, clipped_policy_loss
from rllib_llm.columns import ACTION_LOGP, GROUP_ID, POLICY_VERSION, PROX_LOGP, SEED


def episodes_of(group_id: str, version: int, size: int = 2) -> list[SingleAgentEpisode]:
    out = []
    for _ in range(size):
        episode = SingleAgentEpisode(observations=["o"], infos=[{}], len_lookback_buffer=0)
        episode.custom_data.update({GROUP_ID: group_id, POLICY_VERSION: version})
        out.append(episode)
    return out


# --- the queue -----------------------------------------------------------------------------------------


def test_the_queue_takes_the_oldest_fresh_groups_and_drops_and_counts_the_stale_ones():
    queue = GroupQueue(max_staleness=1)
    queue.add(episodes_of("a", 0) + episodes_of("b", 1))
    queue.add(episodes_of("c", 2) + episodes_of("d", 2))
    # At version 2, group a (2 updates old) is too stale; b (1 old) and c (fresh) are taken, d waits.
    episodes, stats = queue.take(2, current_version=2)
    assert [e.custom_data[GROUP_ID] for e in episodes] == ["b", "b", "c", "c"]
    assert stats[GROUPS_DROPPED] == 1 and stats[STALENESS_MAX] == 1 and stats[STALENESS_MEAN] == 0.5
    assert len(queue) == 1
    _, stats = queue.take(5, current_version=2)
    assert stats[GROUPS_DROPPED] == 0 and stats[STALENESS_MAX] == 0  # the count restarts after a take


def test_max_staleness_zero_trains_only_on_the_current_policy():
    queue = GroupQueue(max_staleness=0)
    queue.add(episodes_of("a", 3) + episodes_of("b", 4))
    episodes, stats = queue.take(2, current_version=4)
    assert {e.custom_data[GROUP_ID] for e in episodes} == {"b"} and stats[GROUPS_DROPPED] == 1


def test_dynamic_sampling_filters_groups_whose_returns_are_all_equal_as_they_arrive():
    from rllib_llm.algorithms.dynamic_sampling import is_informative

    informative = episodes_of("i", 0)
    for episode, reward in zip(informative, (1.0, 0.0), strict=True):
        episode.add_env_step("o2", "+", reward, terminated=True)
    flat = episodes_of("f", 0)
    for episode in flat:
        episode.add_env_step("o2", "+", 1.0, terminated=True)
    queue = GroupQueue(max_staleness=1, keep=is_informative)
    queue.add(informative + flat)
    episodes, stats = queue.take(2, current_version=0)
    assert {e.custom_data[GROUP_ID] for e in episodes} == {"i"} and stats["groups_filtered"] == 1


def test_a_group_that_mixes_policy_versions_is_refused():
    mixed = episodes_of("g", 1, size=1) + episodes_of("g", 2, size=1)
    with pytest.raises(ValueError, match="mixes policy versions"):
        group_version(mixed)
    with pytest.raises(ValueError, match="mixes policy versions"):
        GroupQueue(max_staleness=5).add(mixed)


# --- the decoupled objective, by hand ------------------------------------------------------------------


def test_behaviour_weights_by_hand():
    prox = torch.log(torch.tensor([[0.5, 0.2, 0.9]]))
    behaviour = torch.log(torch.tensor([[0.25, 0.4, 0.3]]))
    # pi_prox / mu = 2, 0.5, 3 -> capped at 2.5: 2, 0.5, 2.5
    torch.testing.assert_close(behaviour_weights(prox, behaviour, cap=2.5), torch.tensor([[2.0, 0.5, 2.5]]))


def test_the_decoupled_loss_weights_each_token_and_clips_against_the_proximal_policy():
    # One row, two tokens, advantage +1, token-mean. Current = proximal policy (ratio 1, unclipped):
    # per-token loss -A * r * w = -w, weights (pi_prox / mu) = 2 and 0.5 -> loss -(2 + 0.5) / 2 = -1.25.
    logp = torch.log(torch.tensor([[0.4, 0.1]]))
    mu = torch.log(torch.tensor([[0.2, 0.2]]))
    mask = torch.ones(1, 2)
    weights = behaviour_weights(logp, mu, cap=10.0)
    loss, _ = clipped_policy_loss(logp, logp, torch.tensor([1.0]), mask, token_weights=weights)
    assert loss.item() == pytest.approx(-1.25)
    # Against mu instead (no correction): ratios 2 and 0.5, clipped to 1.2 and 0.5 -> -(1.2 + 0.5) / 2.
    plain, _ = clipped_policy_loss(logp, mu, torch.tensor([1.0]), mask)
    assert plain.item() == pytest.approx(-0.85)
    # The weights are constants: the gradient is w * A * d log pi, not d(w).
    param = logp.clone().requires_grad_(True)
    loss, _ = clipped_policy_loss(param, logp, torch.tensor([1.0]), mask, token_weights=behaviour_weights(param, mu, 10.0))
    loss.backward()
    torch.testing.assert_close(param.grad, -torch.tensor([[2.0, 0.5]]) / 2)


# --- a run: a remote EnvRunner samples while the Learner updates -----------------------------------------


def test_async_training_bounds_staleness_and_corrects_against_the_recorded_behaviour_logprobs(ray_session):
    from tests.conftest import tiny_config

    config = (
        tiny_config()
        .env_runners(num_env_runners=1, num_cpus_per_env_runner=0.5)
        .training(async_rollouts=True, max_staleness=1, broadcast_interval=1)
    )
    algo = config.build_algo()
    try:
        results, trained = [], []
        for _ in range(4):
            results.append(algo.train())
            trained.append(list(algo.training_episodes))
        for episodes in trained:
            assert len(episodes) == config.num_groups * config.group_size
            for group in {e.custom_data[GROUP_ID] for e in episodes}:  # one version per group, never mixed
                group_version([e for e in episodes if e.custom_data[GROUP_ID] == group])
        stats = [r["async_rollouts"] for r in results]
        assert all(s[STALENESS_MAX] <= config.max_staleness for s in stats)
        # The runner always has the next rollout in flight when the Learner updates: it is one update old.
        assert stats[-1][STALENESS_MEAN] == 1.0
        assert algo.policy_version == 4
        learner = results[-1]["learners"]["default_policy"]
        assert 0.0 < learner["behaviour_weight_mean"] and np.isfinite(learner["policy_loss"])

        # The Learner's pipeline writes the proximal log-probs next to the recorded behaviour log-probs,
        # and the weights the loss uses are their truncated ratio.
        episodes = trained[-1]
        local = algo.learner_group._learner
        batch = local._learner_connector(rl_module=local.module, batch={}, episodes=episodes, shared_data={})
        columns = batch["default_policy"]
        recorded = [lp for e in episodes for lp in e.get_extra_model_outputs(ACTION_LOGP)]
        mask = columns["response_mask"].bool()
        for row, logp in enumerate(recorded):
            torch.testing.assert_close(columns[ACTION_LOGP][row][mask[row]], torch.tensor(logp, dtype=torch.float32))
        weights = behaviour_weights(columns[PROX_LOGP], columns[ACTION_LOGP], config.behaviour_weight_cap)
        expected = torch.clamp(torch.exp(columns[PROX_LOGP] - columns[ACTION_LOGP]), max=config.behaviour_weight_cap)
        torch.testing.assert_close(weights[mask], expected[mask])
        assert not torch.allclose(columns[PROX_LOGP][mask], columns[ACTION_LOGP][mask])  # sampled by older weights

        # Weights go by RLlib's state server: it holds the Learner's newest version, which the runners pull
        # when a rollout starts. Held-out evaluation runs on the local runner (the remote one is busy with a
        # rollout), which pulls the latest weights first.
        assert ray.get(algo._state_server.get_version.remote()) == algo.policy_version
        assert algo.evaluate_seeds([10, 11])["num_episodes"] == 2
        assert algo.env_runner.weights_seq_no == algo.policy_version
    finally:
        algo.stop()


def test_a_rollout_of_two_updates_feeds_two_updates_and_its_groups_stay_within_their_staleness(ray_session):
    """``updates_per_rollout=2``: one ``sample()`` plays 2 x ``num_groups`` groups; the queue hands them to two
    updates of ``num_groups`` groups each (the second without a new rollout), trained 2-3 updates after the
    weights that sampled them in steady state, none dropped at ``max_staleness=3``."""
    from tests.conftest import tiny_config

    config = (
        tiny_config()
        .env_runners(num_env_runners=1, num_cpus_per_env_runner=0.5)
        .training(async_rollouts=True, updates_per_rollout=2, max_staleness=3)
    )
    algo = config.build_algo()
    try:
        stats, rollouts = [], []
        for _ in range(6):
            stats.append(algo.train()["async_rollouts"])
            episodes = algo.training_episodes
            assert len(episodes) == config.num_groups * config.group_size
            # group ids are <worker>-<rollout>-<group>: which rollout fed this update
            rollouts.append({e.custom_data[GROUP_ID].rsplit("-", 1)[0] for e in episodes})
        assert all(len(r) == 1 for r in rollouts)  # an update's groups come from one rollout, oldest first
        order = [r.pop() for r in rollouts]
        assert order[0::2] == order[1::2]  # each rollout fed two updates in a row
        assert len(set(order)) == 3
        assert all(s[STALENESS_MAX] <= 3 for s in stats) and sum(s[GROUPS_DROPPED] for s in stats) == 0
        assert max(s[STALENESS_MAX] for s in stats) >= 2  # later rollouts were sampled two or more updates back
    finally:
        algo.stop()


def test_max_staleness_zero_drops_the_rollout_that_was_in_flight(ray_session):
    from tests.conftest import tiny_config

    config = (
        tiny_config()
        .env_runners(num_env_runners=1, num_cpus_per_env_runner=0.5)
        .training(async_rollouts=True, max_staleness=0, off_policy_correction="none")
    )
    algo = config.build_algo()
    try:
        stats = [algo.train()["async_rollouts"] for _ in range(3)]
        assert all(s[STALENESS_MAX] == 0 for s in stats)
        assert sum(s[GROUPS_DROPPED] for s in stats) >= config.num_groups  # each update outdates the next rollout
        assert "behaviour_weight_mean" not in algo.train()["learners"]["default_policy"]
    finally:
        algo.stop()


def test_async_rollouts_turn_off_rllibs_blocking_connector_state_sync():
    from tests.conftest import tiny_config

    config = tiny_config().env_runners(num_env_runners=1).training(async_rollouts=True)
    assert config.merge_env_runner_states is False and config.broadcast_env_runner_states is False
    config.validate()
    config.env_runners(merge_env_runner_states="training_only")
    with pytest.raises(ValueError, match="connector-state sync would wait for every rollout in flight"):
        config.validate()


def test_async_rollouts_without_remote_env_runners_fail_with_one_clear_error(ray_session):
    from tests.conftest import tiny_config

    algo = tiny_config().training(async_rollouts=True).build_algo()
    try:
        with pytest.raises(ValueError, match=r"needs remote EnvRunners.*num_env_runners=1"):
            algo.train()
    finally:
        algo.stop()


def test_async_rollouts_without_any_episode_stop_training_with_one_clear_error(ray_session, monkeypatch):
    """Runners that return empty rollouts must not look like training (as in lock-step mode); a slow
    rollout, still in flight, is no empty one."""
    from rllib_llm.algorithms import algorithm as algorithm_module
    from tests.conftest import tiny_config

    monkeypatch.setattr(algorithm_module, "_sample_with_metrics", lambda runner, updates=1: ([], {}))
    config = tiny_config().env_runners(num_env_runners=1, num_cpus_per_env_runner=0.5).training(async_rollouts=True)
    algo = config.build_algo()
    try:
        with pytest.raises(Exception, match="No EnvRunner returned episodes for 3 rollouts in a row"):
            algo.train()
    finally:
        algo.stop()


def slow_restart_env(marker: str, delay_s: float) -> type:
    """NumberLine whose first construction in a process sleeps ``delay_s`` once ``marker`` exists: an EnvRunner
    restarted after that starts as slowly as one loading a real model (its first start stays fast). Defined
    in a function so that Ray pickles the class by value into the runner's process."""
    import os
    import time

    from rllib_llm.envs.gym_cards.number_line import NumberLineEnv

    class SlowRestartNumberLine(NumberLineEnv):
        def __init__(self, **kwargs):
            if os.path.exists(marker) and not os.environ.get("SLOW_RESTART_DONE"):
                os.environ["SLOW_RESTART_DONE"] = "1"
                time.sleep(delay_s)
            super().__init__(**kwargs)

    return SlowRestartNumberLine


@pytest.mark.parametrize("async_rollouts,evaluate_first", [(True, False), (False, False), (False, True)],
                         ids=["async", "lockstep", "evaluate"])
def test_training_waits_for_a_restarted_env_runner_instead_of_failing(ray_session, tmp_path, async_rollouts,
                                                                      evaluate_first):
    """RLlib restarts a crashed remote EnvRunner (``restart_failed_env_runners``, its default) as a new actor,
    which takes as long as its start. Until it is back no runner can sample: the iterations meanwhile must wait
    for it (not end empty three times in a row, which stops training as "sampling is failing"), the
    ``on_env_runners_recreated`` callback fires once, and (async) the new actor gets the state server's handle
    again, as IMPALA re-shares it, or it would sample with its initial weights forever. A held-out evaluation
    (on the remote runner in lock-step training) waits for it too. Its first rollout back uses the Learner's
    weights (lock-step: it missed the broadcasts while down), group ids of its own (``1r1-...``) and its own
    seeds, not the local runner's seed stream that RLlib's restore copies into it."""
    import os

    from tests.conftest import tiny_config

    marker = tmp_path / "restarted"
    recreated: list[list[int]] = []
    config = (
        tiny_config()
        .environment(slow_restart_env(str(marker), delay_s=12.0), env_config={"max_position": 3, "max_steps": 3})
        .env_runners(num_env_runners=1, num_cpus_per_env_runner=0.5)
        .fault_tolerance(restart_failed_env_runners=True)
        .callbacks(on_env_runners_recreated=lambda env_runner_indices, **kw: recreated.append(env_runner_indices))
        .training(async_rollouts=async_rollouts, max_staleness=10)
    )
    algo = config.build_algo()
    try:
        for _ in range(2):
            algo.train()
        version = algo.policy_version
        local_rng = np.random.default_rng()
        local_rng.bit_generator.state = algo.env_runner_group.local_env_runner._rng.bit_generator.state
        local_stream = [int(x) for x in local_rng.integers(0, 2**31 - 1, size=config.num_groups)]
        marker.touch()
        algo.env_runner_group.foreach_env_runner(lambda runner: os._exit(1), local_env_runner=False,
                                                 timeout_seconds=5)
        if evaluate_first:
            assert algo.evaluate_seeds([0, 1, 2])["num_episodes"] == 3
            assert recreated == [[1]]
        algo.train()
        back = [e for e in algo.training_episodes if e.custom_data[GROUP_ID].startswith("1r1-")]
        assert back, sorted({e.custom_data[GROUP_ID] for e in algo.training_episodes})
        if not async_rollouts:  # the whole batch is the restored runner's first rollout
            assert len(back) == len(algo.training_episodes)
            assert {e.custom_data[POLICY_VERSION] for e in back} == {version}
            seeds = {int(e.custom_data[GROUP_ID].rsplit("-", 1)[1]): e.custom_data[SEED] for e in back}
            assert [seeds[g] for g in sorted(seeds)] != local_stream
        for _ in range(2):
            algo.train()
        assert algo.env_runner_group.num_healthy_remote_env_runners() == 1
        assert algo.policy_version >= version + 2  # trained on the restarted runner's rollouts
        assert recreated == [[1]]
        if async_rollouts:
            [has_server] = algo.env_runner_group.foreach_env_runner(
                lambda runner: runner._env_runner_state_server is not None, local_env_runner=False)
            assert has_server
            # Its rollouts were sampled with pulled weights, not the initial ones (version 0).
            versions = {e.custom_data[POLICY_VERSION] for e in algo.training_episodes}
            assert min(versions) > 0
    finally:
        algo.stop()

"""Scaling out as in RLlib: ``.env_runners(num_env_runners=N)`` samples in remote EnvRunner actors, their
weights follow the Learner's, group ids stay unique across runners, and evaluation uses a remote runner."""

import numpy as np
import pytest

from rllib_llm.columns import GROUP_ID, SEED
from tests.conftest import tiny_config

pytestmark = pytest.mark.usefixtures("ray_session")


def test_remote_env_runners_sample_train_sync_and_evaluate():
    # Two actors of half a CPU each: the test's Ray has 2 CPUs and the driver holds the Learner.
    config = tiny_config().env_runners(num_env_runners=2, num_cpus_per_env_runner=0.5)
    algo = config.build_algo()
    try:
        group = algo.env_runner_group
        assert group.num_remote_env_runners() == 2
        episodes = algo.sample_episodes()
        workers = {ep.custom_data[GROUP_ID].split("-")[0] for ep in episodes}
        assert workers == {"1", "2"}  # both actors played; ids "<worker>-<rollout>-<group>" never collide
        assert len({ep.custom_data[GROUP_ID] for ep in episodes}) == 2 * config.num_groups
        seeds = {w: {ep.custom_data[SEED] for ep in episodes if ep.custom_data[GROUP_ID].startswith(w)} for w in "12"}
        assert seeds["1"] != seeds["2"]  # each runner draws its own start states (seed + worker index)
        result = algo.train()
        assert result["env_runners"]["num_env_steps_sampled"] >= 2 * config.num_groups * config.group_size
        assert 0.0 <= result["env_runners"]["success_rate"] <= 1.0
        learner = algo.learner_group.get_state(components="learner/rl_module/default_policy")
        weights = learner["learner"]["rl_module"]["default_policy"]
        remote = group.foreach_env_runner(lambda runner: runner.module.get_state(), local_env_runner=False)
        assert len(remote) == 2
        for state in remote:
            for key, value in weights.items():
                np.testing.assert_allclose(state[key], value, rtol=1e-6)
        stats = algo.evaluate_seeds([10, 11, 12])
        assert stats["num_episodes"] == 3
        assert stats == algo.evaluate_seeds([10, 11, 12])  # greedy: the same on a replay
    finally:
        algo.stop()


def test_rollouts_without_any_episode_warn_then_stop_training(monkeypatch, caplog):
    """Every EnvRunner failing (e.g. remote actors restarting) must not look like training: a warning per
    empty rollout, an error after MAX_EMPTY_SAMPLES in a row."""
    from rllib_llm.algorithms import algorithm as algorithm_module

    algo = tiny_config().build_algo()
    try:
        monkeypatch.setattr(algorithm_module, "sample_with_env_runners", lambda env_runner_group: ([], []))
        for _ in range(algorithm_module.MAX_EMPTY_SAMPLES - 1):
            algo.train()
        assert sum("No EnvRunner returned episodes" in r.message for r in caplog.records) == 2
        with pytest.raises(Exception, match="No EnvRunner returned episodes for 3 rollouts in a row"):
            algo.train()
    finally:
        algo.stop()

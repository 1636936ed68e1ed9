"""``evaluation(held_out_interval=N)``: held-out greedy success in train()'s results every N iterations."""

import pytest

from tests.conftest import tiny_config

pytestmark = pytest.mark.usefixtures("ray_session")


def test_every_second_iteration_reports_the_held_out_seeds_success():
    algo = tiny_config().evaluation(held_out_interval=2, evaluation_num_seeds=3).build_algo()
    try:
        first, second = algo.train(), algo.train()
        assert "held_out" not in first
        held_out = second["held_out"]
        assert held_out["num_episodes"] == 3 and held_out["success_rate"] * 3 == pytest.approx(round(held_out["success_rate"] * 3))
        # The evaluation is greedy on fixed seeds: the same weights give the same numbers.
        assert algo.evaluate_seeds()["success_rate"] == held_out["success_rate"]
        # Held-out episodes are not training samples.
        runners = "env_runners"
        lifetime = "num_env_steps_sampled_lifetime"
        assert second[runners][lifetime] == first[runners][lifetime] + second[runners]["num_env_steps_sampled"]
    finally:
        algo.stop()


def test_the_interval_is_validated():
    with pytest.raises(ValueError, match="held_out_interval"):
        tiny_config().evaluation(held_out_interval=0).validate()

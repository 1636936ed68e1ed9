"""Resume in process on the tiny model: a run restored from its checkpoint continues exactly as the
uninterrupted run does (iteration counter, weights, optimizer state, env runner seed RNG, global RNGs)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from rllib_llm.run.checkpoints import last_checkpoint, restore, save_checkpoint
from rllib_llm.run.cli import main
from tests.conftest import tiny_config

pytestmark = pytest.mark.usefixtures("ray_session")


def learner_state(algo) -> dict:
    return algo.learner_group.get_state()["learner"]


def assert_same(a, b, path: str = "") -> None:
    """Nested dicts/lists of arrays and numbers are equal, leaf by leaf (``path`` names the first mismatch)."""
    if isinstance(a, dict):
        assert set(a) == set(b), path
        for key in a:
            assert_same(a[key], b[key], f"{path}/{key}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{path}/{i}")
    else:
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=path)


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory):
    """An uninterrupted run of 2 iterations that checkpointed after the first, and what it looked like then."""
    run_dir = tmp_path_factory.mktemp("run")
    algo = tiny_config().build_algo()
    try:
        algo.train()
        save_checkpoint(algo, run_dir, {"before": {"success_rate": 0.25}})
        at_checkpoint = {
            "optimizer": learner_state(algo)["optimizer"],
            "env_runner": algo.env_runner.get_state(),
        }
        second = algo.train()
        yield {
            "run_dir": run_dir,
            "at_checkpoint": at_checkpoint,
            "second": second,
            "weights": learner_state(algo)["rl_module"],
        }
    finally:
        algo.stop()


def test_resumed_run_continues_exactly_like_the_uninterrupted_one(interrupted):
    point = last_checkpoint(interrupted["run_dir"])
    assert point.iteration == 1 and point.extra["before"] == {"success_rate": 0.25}
    algo = tiny_config().build_algo()
    try:
        restore(algo, point)
        assert algo.iteration == 1
        assert_same(learner_state(algo)["optimizer"], interrupted["at_checkpoint"]["optimizer"], "optimizer")
        runner_state = algo.env_runner.get_state()
        assert runner_state["rng"] == interrupted["at_checkpoint"]["env_runner"]["rng"]
        assert runner_state["num_rollouts"] == interrupted["at_checkpoint"]["env_runner"]["num_rollouts"] == 1
        second = algo.train()
        assert second["training_iteration"] == 2
        assert_same(learner_state(algo)["rl_module"], interrupted["weights"], "weights after iteration 2")
        for key in ("episode_return_mean", "response_length_mean", "valid_action_rate"):
            assert second["env_runners"][key] == interrupted["second"]["env_runners"][key], key
    finally:
        algo.stop()


def test_evaluate_a_checkpoint_corrupt_beyond_the_file_checks_exits_2_with_one_line(interrupted, tmp_path, capsys):
    """Bytes flipped inside a pickle pass the size/structure checks; RLlib's failure is still one line."""
    root = Path(shutil.copytree(interrupted["run_dir"] / "checkpoint", tmp_path / "checkpoint"))
    target = root / "class_and_ctor_args.pkl"
    data = bytearray(target.read_bytes())
    data[2:-1] = b"\x00" * (len(data) - 3)
    target.write_bytes(bytes(data))
    assert main(["evaluate", str(root), "--num-seeds", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Could not restore checkpoint" in err and "Traceback" not in err


def test_a_resumed_run_with_remote_env_runners_draws_the_seeds_and_ids_the_uninterrupted_one_draws(tmp_path):
    """RLlib checkpoints only the local EnvRunner's state; each remote runner's seed RNG and rollout counter
    travel in the Algorithm's state too (``REMOTE_ENV_RUNNERS``), so a resumed run's remote runner goes on with
    the seeds and group ids the uninterrupted run draws next, instead of replaying its first ones."""
    from rllib_llm.columns import GROUP_ID, SEED

    def drawn(algo) -> list[tuple[str, int]]:
        return sorted({(e.custom_data[GROUP_ID], e.custom_data[SEED]) for e in algo.training_episodes})

    config = tiny_config().env_runners(num_env_runners=1, num_cpus_per_env_runner=0.5)
    algo = config.build_algo()
    try:
        algo.train()
        save_checkpoint(algo, tmp_path, {})
        algo.train()
        uninterrupted = drawn(algo)
    finally:
        algo.stop()
    algo = config.build_algo()
    try:
        restore(algo, last_checkpoint(tmp_path))
        algo.train()
        assert drawn(algo) == uninterrupted
        assert uninterrupted[0][0].startswith("1-1-")  # the remote runner's second rollout
    finally:
        algo.stop()

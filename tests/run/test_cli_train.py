"""End to end on the tiny model: training iterations, weight sync, evaluation, checkpoints, the CLI."""

import json

import numpy as np
import pytest

from rllib_llm.run.cli import main
from tests.conftest import tiny_config

pytestmark = pytest.mark.usefixtures("ray_session")


@pytest.fixture(scope="module")
def algo():
    import ray

    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    algo = tiny_config().build_algo()
    yield algo
    algo.stop()


def learner_weights(algo):
    return algo.learner_group.get_state(components="learner/rl_module/default_policy")["learner"]["rl_module"]["default_policy"]


def test_train_updates_weights_and_syncs_them_to_the_env_runner(algo):
    before = {k: v.copy() for k, v in learner_weights(algo).items()}
    result = algo.train()
    after = learner_weights(algo)
    assert any(not np.allclose(before[k], after[k]) for k in before)
    runner_state = algo.env_runner.module.get_state()
    for key, value in after.items():
        np.testing.assert_allclose(runner_state[key], value, rtol=1e-6)
    env = result["env_runners"]
    for key in ("success_rate", "valid_action_rate", "episode_return_mean", "response_length_mean", "generated_tokens_per_s"):
        assert key in env
    learner = result["learners"]["default_policy"]
    assert {"policy_loss", "entropy", "clip_fraction"} <= set(learner)


def test_evaluate_seeds_is_deterministic_and_greedy(algo):
    first = algo.evaluate_seeds([10, 11, 12])
    assert first == algo.evaluate_seeds([10, 11, 12])
    # The rates are those of the episodes played: one per seed, greedy (the same episodes again).
    episodes = algo.play_held_out([10, 11, 12])
    assert [ep.custom_data["seed"] for ep in episodes] == [10, 11, 12]
    won = [bool((ep.get_infos(-1) or {}).get("won")) for ep in episodes]
    valid = [bool(v) for ep in episodes for v in ep.get_extra_model_outputs("is_action_valid")]
    assert first["num_episodes"] == 3 and first["success_rate"] == sum(won) / 3
    assert first["valid_action_rate"] == sum(valid) / len(valid)


def test_checkpoint_round_trip_keeps_weights(algo, tmp_path):
    from ray.rllib.algorithms.algorithm import Algorithm

    path = algo.save_to_path(str(tmp_path / "ckpt"))
    restored = Algorithm.from_checkpoint(path)
    try:
        original, loaded = learner_weights(algo), learner_weights(restored)
        for key in original:
            np.testing.assert_allclose(original[key], loaded[key])
        assert restored.evaluate_seeds([10, 11, 12]) == algo.evaluate_seeds([10, 11, 12])
    finally:
        restored.stop()


def test_kl_to_reference_is_logged_when_enabled():
    algo = tiny_config().training(kl_coeff=0.1, kl_estimator="low_var_kl").build_algo()
    try:
        result = algo.train()
        assert "kl" in result["learners"]["default_policy"]
    finally:
        algo.stop()


def test_cli_train_then_evaluate(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "tests/fixtures/tiny_numberline.py", "--output", str(out)]) == 0
    captured = capsys.readouterr()
    printed = captured.out
    assert "Untrained policy: success rate" in printed and "Trained policy" in printed
    assert "success" in printed and "tok/s" in printed  # the progress table header
    # Not a terminal (captured, as in a log file): no progress bar, whose carriage returns would mix with the rows.
    assert "\r" not in printed + captured.err and "training:" not in captured.err
    assert "Evaluating the untrained policy on 3 held-out seeds..." in printed
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary) >= {"before", "after", "checkpoint"}
    assert summary["stopped"] == "after iteration 1: the iteration limit (1)"
    rows = [json.loads(line) for line in (out / "progress.jsonl").read_text().splitlines()]
    assert [r["iter"] for r in rows] == [1.0]
    assert main(["evaluate", summary["checkpoint"], "--num-seeds", "2"]) == 2  # which config? (none is unpickled)
    err = capsys.readouterr().err
    assert "pass --example tests/fixtures/tiny_numberline.py" in err and len(err.strip().splitlines()) == 1
    assert main(["evaluate", summary["checkpoint"], "--num-seeds", "2", "--example", "tests/fixtures/tiny_numberline.py"]) == 0
    printed = capsys.readouterr().out
    assert "Evaluating " in printed and " held-out seeds from " in printed and "over 2 held-out seeds" in printed
    assert main(["evaluate", summary["checkpoint"], "--num-seeds", "2", "--trust-checkpoint"]) == 0  # RLlib's own
    assert "over 2 held-out seeds" in capsys.readouterr().out


def test_a_run_folder_is_never_mixed_with_a_second_run(tmp_path, capsys):
    """Training into a folder that holds a run is refused unless --resume or --overwrite says what to do."""
    out = tmp_path / "run"
    args = ["train", "tests/fixtures/tiny_numberline.py", "--output", str(out), "--no-tracking", "--no-eval"]
    assert main(args) == 0
    first = (out / "progress.jsonl").read_text()
    capsys.readouterr()
    assert main(args) == 2  # refused before anything is written
    err = capsys.readouterr().err
    assert "already holds a run" in err and "--resume" in err and "--overwrite" in err and len(err.splitlines()) == 1
    assert (out / "progress.jsonl").read_text() == first
    assert main([*args, "--resume", "--overwrite"]) == 2
    assert main([*args, "--iterations", "2", "--overwrite"]) == 0
    rows = [json.loads(line) for line in (out / "progress.jsonl").read_text().splitlines()]
    assert [r["iter"] for r in rows] == [1.0, 2.0]  # the new run's rows only


@pytest.mark.parametrize("option", ["--iterations=0", "--iterations=-3", "--eval-seeds=0", "--checkpoint-every=-1"])
def test_cli_refuses_out_of_range_counts(option, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "tests/fixtures/tiny_numberline.py", "--output", str(tmp_path / "run"), option])
    assert exit_info.value.code == 2
    assert "must be an integer >=" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_cli_reports_bad_input_in_one_line(tmp_path, capsys):
    assert main(["train", str(tmp_path / "missing.py")]) == 2
    assert "not found" in capsys.readouterr().err
    assert main(["evaluate", str(tmp_path)]) == 2
    assert "not an RLlib checkpoint" in capsys.readouterr().err


def test_init_ray_joins_a_cluster_started_with_ray_start(monkeypatch):
    """After `ray start --head`, ray.init() joins that cluster and refuses num_cpus: we join it instead of failing."""
    import ray

    from rllib_llm.run import cli

    calls = []

    def fake_init(**kwargs):
        calls.append(kwargs)
        if "num_cpus" in kwargs:
            raise ValueError("When connecting to an existing cluster, num_cpus and num_gpus must not be provided.")

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", fake_init)
    cli.init_ray()
    assert len(calls) == 2 and "num_cpus" in calls[0] and "num_cpus" not in calls[1]
    calls.clear()
    monkeypatch.setattr(ray, "init", lambda **kw: (_ for _ in ()).throw(ValueError("some other problem")))
    with pytest.raises(ValueError, match="some other problem"):
        cli.init_ray()


def test_gpu_size_puts_learner_and_env_runner_on_the_gpu_and_raises_small_sizes_only():
    from rllib_llm.run.cli import GPU_MICRO_BATCH_SIZE, GPU_NUM_GROUPS, at_gpu_size

    small = at_gpu_size(tiny_config().group_rollouts(num_groups=2, group_size=4).training(micro_batch_size=4))
    assert (small.num_gpus_per_learner, small.num_gpus_per_env_runner) == (1, 1)
    assert (small.num_groups, small.micro_batch_size) == (GPU_NUM_GROUPS, GPU_MICRO_BATCH_SIZE)
    big = at_gpu_size(tiny_config().group_rollouts(num_groups=12, group_size=4).training(micro_batch_size=None))
    assert (big.num_groups, big.micro_batch_size) == (12, None)
    remote = at_gpu_size(tiny_config().env_runners(num_env_runners=2))
    assert (remote.num_gpus_per_learner, remote.num_gpus_per_env_runner) == (0.5, 0.25)
    pairs = at_gpu_size(tiny_config().group_rollouts(num_groups=6, group_size=2))
    assert (pairs.num_groups, pairs.group_size) == (16, 2)  # 32 episodes, the example's group size kept


def test_cli_gpu_option_reaches_the_config(tmp_path, monkeypatch):
    import rllib_llm.run.cli as cli

    seen = {}
    monkeypatch.setattr(cli, "at_gpu_size", lambda config: seen.setdefault("config", config))
    example = tmp_path / "ex.py"
    example.write_text("from tests.conftest import tiny_config\nconfig = tiny_config()\n")
    monkeypatch.setattr(cli, "validate_config", lambda config, source: (_ for _ in ()).throw(SystemExit(7)))
    with pytest.raises(SystemExit):
        main(["train", str(example), "--gpu", "--output", str(tmp_path / "run"), "--no-tracking"])
    assert "config" in seen

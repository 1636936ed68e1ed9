"""A real Ray Tune sweep: a 2x2 grid (group size x learning rate) of one iteration on the tiny model."""

from __future__ import annotations

import pytest

from rllib_llm.run.sweeps import HELD_OUT_METRIC, SUCCESS_METRIC, sweep_main
from tests.run.conftest import TINY_EXAMPLE


@pytest.mark.slow
def test_tune_grid_reports_every_trial_and_the_best_by_success_rate(tmp_path, capsys, ray_session):
    from mlflow.tracking import MlflowClient

    from rllib_llm.run.tracking import resolve_tracking_uri

    argv = ["--base", TINY_EXAMPLE, "--iterations", "1", "--grid", "group_size=2,4", "--grid", "lr=1e-3,1e-4",
            "--storage", str(tmp_path / "tune"), "--name", "tiny_sweep", "--tracking-uri", str(tmp_path / "mlruns")]
    summary = sweep_main(None, {}, {}, argv=argv)
    trials = summary["trials"]
    assert sorted((t["group_size"], t["lr"]) for t in trials) == [(2, 1e-4), (2, 1e-3), (4, 1e-4), (4, 1e-3)]
    assert all(t["error"] is None and t["iterations"] == 1 for t in trials)
    # A success rate over num_groups x group_size episodes (2 x group_size in the tiny example): k / n.
    for t in trials:
        episodes = 2 * t["group_size"]
        assert t[SUCCESS_METRIC] * episodes == pytest.approx(round(t[SUCCESS_METRIC] * episodes))
    # Every trial evaluated the held-out seeds at its last iteration; the best trial is chosen on them.
    assert all(0.0 <= t[HELD_OUT_METRIC] <= 1.0 for t in trials)
    assert summary["metric"] == HELD_OUT_METRIC
    assert summary["best"][HELD_OUT_METRIC] == max(t[HELD_OUT_METRIC] for t in trials)
    assert "Best trial by held_out/success_rate (max): group_size=" in capsys.readouterr().out
    client = MlflowClient(tracking_uri=resolve_tracking_uri(str(tmp_path / "mlruns"))[0])
    runs = client.search_runs([client.get_experiment_by_name("tiny_sweep").experiment_id])
    assert len(runs) == 4 and {r.data.params["group_size"] for r in runs} == {"2", "4"}
    # Each trial's reported success rate is the one its MLflow run tracked.
    tracked = {(int(r.data.params["group_size"]), float(r.data.params["lr"])): r.data.metrics[SUCCESS_METRIC]
               for r in runs}
    assert {(t["group_size"], t["lr"]): t[SUCCESS_METRIC] for t in trials} == pytest.approx(tracked)
    held_out = {(int(r.data.params["group_size"]), float(r.data.params["lr"])): r.data.metrics[HELD_OUT_METRIC]
                for r in runs}
    assert {(t["group_size"], t["lr"]): t[HELD_OUT_METRIC] for t in trials} == pytest.approx(held_out)


def test_a_sweep_hands_the_tuned_examples_stop_criteria_to_tune(monkeypatch, tmp_path):
    from ray import tune

    from rllib_llm.run.cli import load_tuned_example
    from rllib_llm.run.sweeps import run_sweep

    seen = {}

    class FakeTuner:
        def __init__(self, trainable, *, param_space, tune_config, run_config):
            seen["stop"] = run_config.stop

        def fit(self):
            return "results"

    monkeypatch.setattr(tune, "Tuner", FakeTuner)
    config, _ = load_tuned_example(TINY_EXAMPLE)
    stop = {"training_iteration": 9, "time_total_s": 60, "env_runners/success_rate": 0.9}
    assert run_sweep(config, {"lr": [1e-3]}, iterations=3, stop=stop, tracking=False, storage_path=tmp_path) == "results"
    assert seen["stop"] == {"training_iteration": 3, "time_total_s": 60.0, "env_runners/success_rate": 0.9}
    with pytest.raises(ValueError, match="must be a number"):
        run_sweep(config, {"lr": [1e-3]}, iterations=3, stop={"time_total_s": "1m"}, tracking=False)


def test_each_trial_is_tracked_as_rllib_llm_train_tracks_a_run(tmp_path):
    """The sweep's Tune callback logs a trial's params with config_params (as the CLI does) and every
    iteration's result with flatten_metrics' names, and closes the run with the trial's outcome."""
    from types import SimpleNamespace

    from mlflow.tracking import MlflowClient

    from rllib_llm.run.cli import load_tuned_example
    from rllib_llm.run.progress import flatten_metrics
    from rllib_llm.run.sweeps import TrackingCallback, tracking_callbacks
    from rllib_llm.run.tracking import config_params, resolve_tracking_uri

    config, _ = load_tuned_example(TINY_EXAMPLE)
    uri = str(tmp_path / "mlruns")
    [callback] = tracking_callbacks(config, {"lr": [1e-3, 1e-4]}, uri, "sweep_x")
    assert isinstance(callback, TrackingCallback)
    trials = [SimpleNamespace(trial_id=f"t{i}", config={"lr": lr}) for i, lr in enumerate([1e-3, 1e-4])]
    result = {"training_iteration": 1, "env_runners": {"success_rate": 0.25}, "config": {"lr": 1e-3}}
    for trial in trials:
        callback.on_trial_start(0, trials, trial)
        callback.on_trial_result(0, trials, trial, result)
    callback.on_trial_complete(0, trials, trials[0])
    callback.on_trial_error(0, trials, trials[1])
    client = MlflowClient(tracking_uri=resolve_tracking_uri(uri)[0])
    runs = client.search_runs([client.get_experiment_by_name("sweep_x").experiment_id])
    by_lr = {r.data.params["lr"]: r for r in runs}
    assert set(by_lr) == {"0.001", "0.0001"}
    expected = config_params(config.copy(copy_frozen=False).training(lr=1e-4))
    assert {k: v for k, v in by_lr["0.0001"].data.params.items()} == expected
    assert by_lr["0.001"].data.metrics == flatten_metrics(result) == {"env_runners/success_rate": 0.25, "training_iteration": 1.0}
    assert by_lr["0.001"].info.status == "FINISHED" and by_lr["0.0001"].info.status == "FAILED"


def test_tunes_checkpoint_hook_writes_what_rllib_llm_train_writes(tmp_path, ray_session):
    """``Trainable.save`` calls ``save_checkpoint``: the same files and integrity marker as the CLI's, so
    ``read_checkpoint`` (what ``rllib-llm evaluate`` and ``--resume`` check first) accepts a sweep's checkpoint."""
    from rllib_llm.checkpoint_files import MARKER_FILE, RNG_FILE
    from rllib_llm.run.checkpoints import read_checkpoint
    from tests.conftest import tiny_config

    algo = tiny_config().build_algo()
    try:
        algo.train()
        algo.save_checkpoint(str(tmp_path / "trial_ckpt"))
    finally:
        algo.stop()
    root = tmp_path / "trial_ckpt"
    assert (root / MARKER_FILE).is_file() and (root / RNG_FILE).is_file()
    assert read_checkpoint(root).iteration == 1
    (root / "learner_group" / "state.pkl").write_bytes(b"\x80garbage.")  # same size checks as the CLI's
    with pytest.raises(Exception, match="learner_group"):
        read_checkpoint(root)

"""MLflow tracking of `rllib-llm train` (read back with the MLflow client) and the tracker plumbing."""

from __future__ import annotations

import json
import socket
import sys
import types

import pytest

from rllib_llm.run.progress import flatten_metrics
from rllib_llm.run.tracking import Tracking, TrackingError, config_params, resolve_tracking_uri, start_tracking
from tests.conftest import tiny_config


def test_train_logs_params_metrics_and_checkpoint_to_mlflow(tracked_run):
    from mlflow.tracking import MlflowClient

    [tracker] = tracked_run["summary"]["tracking"]
    assert tracker["tracker"] == "mlflow" and tracker["uri"].startswith("sqlite:///")
    client = MlflowClient(tracking_uri=tracker["uri"])
    experiment = client.get_experiment_by_name("eco")
    assert experiment.artifact_location.startswith((tracked_run["mlruns"] / "artifacts").as_uri())
    [run] = client.search_runs([experiment.experiment_id])
    assert run.info.run_id == tracker["run_id"] and run.info.status == "FINISHED"
    params = run.data.params
    assert params["algorithm"] == "GiGPO" and params["group_size"] == "2" and params["lr"] == "0.001"
    assert params["llm_model.name_or_path"] == "tiny-random-llama" and params["sampling.max_new_tokens"] == "6"
    history = client.get_metric_history(run.info.run_id, "env_runners/success_rate")
    assert [m.step for m in history] == [1]
    assert "learners/default_policy/entropy" in run.data.metrics
    assert {"eval/before_success_rate", "eval/after_success_rate"} <= set(run.data.metrics)
    # progress.jsonl holds every metric MLflow got for the iteration, under the same names and values
    [row] = [json.loads(line) for line in (tracked_run["run_dir"] / "progress.jsonl").read_text().splitlines()]
    logged = {k: v for k, v in run.data.metrics.items() if not k.startswith("eval/")}
    assert len(logged) > 20 and set(logged) <= set(row)
    assert all(row[k] == pytest.approx(v) for k, v in logged.items())
    top = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"checkpoint", "progress.jsonl", "summary.json", "trajectories.jsonl"} <= top
    assert "checkpoint/rllib_checkpoint.json" in {a.path for a in client.list_artifacts(run.info.run_id, "checkpoint")}


def test_resolve_tracking_uri(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    uri, artifacts = resolve_tracking_uri(str(tmp_path / "store"))
    assert uri == f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}" and (tmp_path / "store").is_dir()
    assert artifacts == (tmp_path / "store" / "artifacts").as_uri()
    assert resolve_tracking_uri("http://127.0.0.1:5000") == ("http://127.0.0.1:5000", None)
    assert resolve_tracking_uri("databricks") == ("databricks", None)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "https://mlflow.example:443")
    assert resolve_tracking_uri(None) == ("https://mlflow.example:443", None)
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    monkeypatch.chdir(tmp_path)
    assert resolve_tracking_uri(None)[0] == f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}"  # the default ./mlruns


def test_config_params_flatten_llm_fields_and_skip_functions():
    params = config_params(tiny_config().env_runners(env_to_module_connector=lambda env, spaces, device: []))
    assert params["sampling.max_new_tokens"] == "6" and params["llm_model.name_or_path"] == "tiny-random-llama"
    assert params["env_config.max_position"] == "3" and params["advantage_estimator"] == "gigpo"
    assert all(isinstance(v, str) and len(v) <= 500 for v in params.values())
    assert not any("connector" in k for k in params)


def test_flatten_metrics_uses_tune_names_and_skips_config_and_non_numbers():
    result = {"env_runners": {"success_rate": 0.5, "name": "x"}, "config": {"lr": 1.0}, "done": False,
              "time_this_iter_s": 2, "nan": float("nan")}
    assert flatten_metrics(result) == {"env_runners/success_rate": 0.5, "time_this_iter_s": 2.0}


class _Broken:
    name = "broken"

    def log_metrics(self, metrics, step):
        raise ConnectionError("server went away")


class _Recorder:
    name = "recorder"

    def __init__(self):
        self.calls = []

    def log_metrics(self, metrics, step):
        self.calls.append((metrics, step))


def test_a_failing_tracker_is_dropped_with_a_warning(caplog):
    recorder = _Recorder()
    tracking = Tracking([_Broken(), recorder])
    tracking.log_metrics({"a": 1.0}, step=1)
    tracking.log_metrics({"a": 2.0}, step=2)
    assert tracking.trackers == [recorder] and [step for _, step in recorder.calls] == [1, 2]
    assert "broken tracking stopped" in caplog.text and "server went away" in caplog.text


def test_wandb_is_imported_only_when_configured(monkeypatch, tmp_path):
    calls = []

    class FakeRun:
        name, id, url = "r", "id1", "https://wandb.example/r"
        config = types.SimpleNamespace(update=lambda params, allow_val_change: calls.append(("config", params)))

        def log(self, metrics, step):
            calls.append(("log", metrics, step))

        def finish(self, exit_code):
            calls.append(("finish", exit_code))

    fake = types.ModuleType("wandb")
    fake.init = lambda **kwargs: calls.append(("init", kwargs)) or FakeRun()
    monkeypatch.setitem(sys.modules, "wandb", fake)
    tracking = start_tracking(mlflow=False, wandb_project="proj", run_name="r", directory=tmp_path)
    tracking.log_params({"lr": "0.1"})
    tracking.log_metrics({"env_runners/success_rate": 1.0}, step=3)
    tracking.finish("FAILED")
    assert calls[0][0] == "init" and calls[0][1]["project"] == "proj"
    assert calls[1:] == [("config", {"lr": "0.1"}), ("log", {"env_runners/success_rate": 1.0}, 3), ("finish", 1)]
    assert start_tracking(mlflow=False).trackers == []  # no project: wandb untouched
    monkeypatch.setitem(sys.modules, "wandb", None)  # not installed
    with pytest.raises(TrackingError, match="pip install wandb"):
        start_tracking(mlflow=False, wandb_project="proj")


def test_missing_mlflow_warns_by_default_and_fails_when_asked_for(monkeypatch, caplog, tmp_path):
    monkeypatch.setitem(sys.modules, "mlflow", None)
    monkeypatch.setitem(sys.modules, "mlflow.tracking", None)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert start_tracking().trackers == []
    assert "MLflow tracking is off" in caplog.text
    with pytest.raises(TrackingError, match=r"rllib-llm\[tracking\]"):
        start_tracking(tracking_uri=str(tmp_path))


def test_sweeps_follow_the_same_missing_mlflow_rule_including_the_environment_variable(monkeypatch, caplog, tmp_path):
    from rllib_llm.run.sweeps import tracking_callbacks

    monkeypatch.setitem(sys.modules, "mlflow", None)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert tracking_callbacks(None, {}, None, "sweep") == []
    assert "MLflow tracking is off" in caplog.text
    monkeypatch.setenv("MLFLOW_TRACKING_URI", str(tmp_path))  # asked for through the environment: an error
    with pytest.raises(TrackingError, match=r"rllib-llm\[tracking\]"):
        tracking_callbacks(None, {}, None, "sweep")


def test_cli_reports_an_unreachable_tracking_server_in_one_line_before_training(capsys, tmp_path, monkeypatch):
    from rllib_llm.run.cli import main

    with socket.socket() as sock:  # a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")
    argv = ["train", "tests/fixtures/tiny_numberline.py", "--output", str(tmp_path), "--tracking-uri", f"http://127.0.0.1:{port}"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"rllib-llm: error: MLflow at 'http://127.0.0.1:{port}'") and "\n" not in err
    assert not (tmp_path / "progress.jsonl").exists()


def test_resume_continues_the_checkpointed_runs_mlflow_run(tracked_run, tmp_path):
    """``--resume`` logs into the MLflow run stored in the checkpoint marker: one run, steps 1 then 2."""
    import shutil

    from mlflow.tracking import MlflowClient

    from rllib_llm.run.cli import main

    run_dir, mlruns = tmp_path / "run", tmp_path / "mlruns"
    shutil.copytree(tracked_run["run_dir"], run_dir)
    shutil.copytree(tracked_run["mlruns"], mlruns)
    argv = ["train", "tests/fixtures/tiny_numberline.py", "--output", str(run_dir), "--tracking-uri", str(mlruns),
            "--experiment", "eco", "--resume", "--iterations", "2", "--no-eval"]
    assert main(argv) == 0
    [before] = tracked_run["summary"]["tracking"]
    client = MlflowClient(tracking_uri=f"sqlite:///{mlruns / 'mlflow.db'}")
    [run] = client.search_runs([client.get_experiment_by_name("eco").experiment_id])
    assert run.info.run_id == before["run_id"] and run.info.status == "FINISHED"
    history = client.get_metric_history(run.info.run_id, "env_runners/success_rate")
    assert [m.step for m in history] == [1, 2]
    assert run.data.params["group_size"] == "2"  # the params the run started with are kept


def test_resume_of_a_run_missing_from_the_store_warns_and_starts_a_new_run(tmp_path, caplog):
    pytest.importorskip("mlflow")
    tracking = start_tracking(tracking_uri=str(tmp_path / "store"), experiment="e", mlflow_run_id="0" * 32)
    [tracker] = tracking.trackers
    assert tracker.run_id != "0" * 32 and not tracker.resumed
    assert "to resume is not in" in caplog.text
    tracking.finish()

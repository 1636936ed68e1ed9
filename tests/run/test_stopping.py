"""Tune-style stop criteria of ``rllib-llm train``: thresholds on nested result entries, bad stop dicts."""

import json

import pytest

from rllib_llm.run.cli import main
from rllib_llm.run.stopping import check_stop, learning_criteria, reached_criterion, result_value

RESULT = {"training_iteration": 3, "time_total_s": 12.5, "env_runners": {"success_rate": 0.75, "agent_a": {"x": 1}}}


def test_nested_keys_are_joined_by_slashes():
    assert result_value(RESULT, "env_runners/success_rate") == 0.75
    assert result_value(RESULT, "env_runners/agent_a/x") == 1
    assert result_value({"a/b": 2, "a": {"b": 3}}, "a/b") == 2  # a flat key wins, as Tune's flattened results
    assert result_value(RESULT, "env_runners/nope") is None


def test_the_first_reached_threshold_is_the_reason_and_the_iteration_cap_is_left_to_the_loop():
    assert reached_criterion({"training_iteration": 1, "time_total_s": 20.0}, RESULT) is None
    assert reached_criterion({"time_total_s": 12.5}, RESULT) == ("time_total_s", "time_total_s 12.5 >= 12.5")
    assert reached_criterion({"time_total_s": 99.0, "env_runners/success_rate": 0.7}, RESULT) == (
        "env_runners/success_rate", "env_runners/success_rate 0.75 >= 0.7"
    )
    # what --as-test requires: the criteria other than the run's iteration and time budget
    assert learning_criteria({"training_iteration": 1, "time_total_s": 9.0, "env_runners/success_rate": 0.7}) == {
        "env_runners/success_rate": 0.7
    }


def test_a_misspelt_criterion_is_an_error_not_a_run_that_never_stops():
    with pytest.raises(ValueError, match="env_runners/succes_rate"):
        reached_criterion({"env_runners/succes_rate": 0.9}, RESULT)


@pytest.mark.parametrize(
    ("stop", "message"),
    [
        ({"training_iteration": 0}, "whole number >= 1"),
        ({"training_iteration": 2.5}, "whole number >= 1"),
        ({"time_total_s": "10"}, "must be a number"),
        ({"time_total_s": True}, "must be a number"),
        ({"time_total_s": float("nan")}, "must be a number"),
        ({3: 1}, "keys must be result names"),
    ],
)
def test_check_stop_names_the_bad_entry(stop, message):
    with pytest.raises(ValueError, match=message):
        check_stop(stop)


@pytest.mark.usefixtures("ray_session")
def test_cli_time_budget_stops_early_then_checkpoints_and_evaluates(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["train", "tests/fixtures/tiny_numberline.py", "--output", str(out), "--iterations", "5",
            "--time-budget-s", "0.001", "--no-tracking"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "Stopping after iteration 1: time_total_s" in printed and "Trained policy" in printed
    summary = json.loads((out / "summary.json").read_text())
    assert summary["iterations_done"] == 1 and summary["stopped"].startswith("after iteration 1")
    assert len((out / "progress.jsonl").read_text().splitlines()) == 1
    assert (out / "checkpoint").is_dir()


def test_cli_refuses_a_bad_stop_dict_in_one_line(tmp_path, capsys):
    example = tmp_path / "bad_stop.py"
    example.write_text(
        "from tests.fixtures.tiny_numberline import config\nstop = {'training_iteration': 1, 'time_total_s': 'soon'}\n"
    )
    assert main(["train", str(example), "--output", str(tmp_path / "run"), "--no-tracking"]) == 2
    err = capsys.readouterr().err
    assert "stop['time_total_s'] must be a number" in err and "Traceback" not in err

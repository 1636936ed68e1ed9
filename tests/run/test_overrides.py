"""``--set METHOD.ARG=VALUE``: any builder argument from the command line, dicts merged, typos named."""

from __future__ import annotations

import pytest

from rllib_llm.run.cli import load_tuned_example, main
from rllib_llm.run.overrides import OverrideError, apply_overrides, parse_value

MAIN_JOB = "tuned_examples/numberline_gigpo.py"


def test_values_are_python_literals_or_text():
    assert parse_value("5e-5") == 5e-5 and parse_value("8") == 8 and parse_value("[1, 2]") == [1, 2]
    assert parse_value("true") is True and parse_value("None") is None and parse_value("vllm") == "vllm"
    assert parse_value('{"r": 8}') == {"r": 8} and parse_value("'hf'") == "hf"


def test_a_set_calls_the_builder_method_and_deeper_paths_merge_into_its_dict():
    config, _ = load_tuned_example(MAIN_JOB)
    lora_alpha, max_steps = config.llm_model["lora"]["lora_alpha"], config.env_config["max_steps"]
    apply_overrides(config, [
        "training.lr=5e-5", "generation.backend=vllm", "group_rollouts.num_groups=8", "generation.temperature=0.7",
        "environment.env_config.max_position=7", "llm.lora.r=8", "training.gamma=0.9",
        "llm.model.inference_dtype=bfloat16",
    ])
    assert config.llm_model["inference_dtype"] == "bfloat16"  # the model spec, not RLlib's `model` dict
    assert config.lr == 5e-5 and config.generation_backend == "vllm" and config.num_groups == 8
    assert config.sampling["temperature"] == 0.7 and config.gamma == 0.9
    assert config.env_config["max_position"] == 7 and config.env_config["max_steps"] == max_steps  # merged
    assert config.llm_model["lora"]["r"] == 8 and config.llm_model["lora"]["lora_alpha"] == lora_alpha
    assert config.llm_model["name_or_path"] == "smollm2-135m-instruct"  # the rest of the model spec kept


@pytest.mark.parametrize("text, message", [
    ("trainig.lr=1", r"not a config builder method \(did you mean training"),
    ("training.lrr=1", r"training\(\) has no argument 'lrr' \(did you mean lr"),
    ("training=1", "expected METHOD.ARG=VALUE"),
    ("training.lr", "expected METHOD.ARG=VALUE"),
    ("training.lr.x=1", "cannot find|not a dict"),
])
def test_a_bad_set_is_one_line_naming_what_is_wrong(text, message):
    config, _ = load_tuned_example(MAIN_JOB)
    with pytest.raises(OverrideError, match=message):
        apply_overrides(config, [text])


def test_the_cli_applies_set_before_it_validates_and_refuses_a_typo_in_one_line(tmp_path, capsys):
    assert main(["train", MAIN_JOB, "--set", "training.lrr=1", "--output", str(tmp_path / "r"), "--no-tracking"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "did you mean lr" in err
    assert not (tmp_path / "r").exists()  # refused before the run folder was made
    assert main(["train", MAIN_JOB, "--set", "generation.backend=nope", "--output", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nope" in err  # the config's own validation, after the --set
    assert main(["train", MAIN_JOB, "--set", "list"]) == 0
    assert "group_rollouts: group_size, num_groups" in capsys.readouterr().out


def test_rllib_example_script_flags_are_accepted(tmp_path, capsys):
    """RLlib users' habits (add_rllib_example_script_args): --stop-iters, --num-env-runners, --num-learners."""
    import argparse

    from rllib_llm.run.cli import add_train_options, train_config

    parser = argparse.ArgumentParser()
    add_train_options(parser)
    args = parser.parse_args(["--stop-iters", "3", "--num-env-runners", "2", "--num-learners", "0", "--set", "list"])
    assert args.iterations == 3
    config, stop = load_tuned_example(MAIN_JOB)
    train_config(config, stop, args, name="x", source=MAIN_JOB)
    assert config.num_env_runners == 2 and config.num_learners == 0


def test_as_test_fails_a_run_that_did_not_reach_its_stop_reward_and_passes_one_that_did(tmp_path, capsys):
    """RLlib's ``--as-test --stop-reward R``: exit 1 (one line) when the return never reached R, 0 when it did
    (the run stops there); without a criterion to reach, a one-line error before anything trains."""
    tiny = "tests/fixtures/tiny_numberline.py"
    base = ["train", tiny, "--no-tracking", "--no-eval", "--checkpoint-every", "0", "--stop-iters", "2"]
    assert main([*base, "--output", str(tmp_path / "none"), "--as-test"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--as-test needs a result the run must reach" in err
    assert not (tmp_path / "none").exists()
    assert main([*base, "--output", str(tmp_path / "high"), "--as-test", "--stop-reward", "100"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "--as-test: env_runners/episode_return_mean >= 100 not reached (stopped after iteration 2" in err
    assert main([*base, "--output", str(tmp_path / "low"), "--as-test", "--stop-reward", "-100"]) == 0
    assert "Stopping after iteration 1: env_runners/episode_return_mean" in capsys.readouterr().out

"""Bad configs fail before Ray starts, in one line naming the field, the file:line and what is allowed."""

from __future__ import annotations

import textwrap

import pytest

from rllib_llm.algorithms.advantages import NORM_MODES
from rllib_llm.run.cli import main, one_line, run_example

HEADER = """\
from rllib_llm.algorithms import GiGPOConfig

config = (
    GiGPOConfig()
    .environment("NumberLine")
    .llm(model="tiny-random-llama")
"""


def write_example(tmp_path, body: str):
    path = tmp_path / "bad_example.py"
    path.write_text(HEADER + textwrap.indent(body, "    ") + "\n)\n")
    return path


def train_error(path, capsys) -> str:
    assert main(["train", str(path), "--output", str(path.parent / "run"), "--no-tracking"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    return lines[0]


def test_a_bad_choice_names_the_field_and_the_allowed_values(tmp_path, capsys):
    line = train_error(write_example(tmp_path, '.training(advantage_norm="bogus")'), capsys)
    assert line.startswith(f"rllib-llm: error: {tmp_path / 'bad_example.py'}: Invalid rllib-llm config")
    assert "advantage_norm must be one of" in line and "got 'bogus'" in line
    assert all(repr(mode) in line for mode in NORM_MODES)
    assert not (tmp_path / "run" / "progress.jsonl").exists()


def test_several_bad_fields_are_all_named_on_the_one_line(tmp_path, capsys):
    line = train_error(write_example(tmp_path, ".group_rollouts(group_size=0)\n.training(gamma=2.0)"), capsys)
    assert "group_size must be an int >= 1, got 0" in line and "gamma must be in [0, 1]" in line


def test_an_unknown_field_names_the_method_the_line_and_the_closest_match(tmp_path, capsys):
    line = train_error(write_example(tmp_path, ".group_rollouts(group_sizes=4)"), capsys)
    assert f"bad_example.py:{HEADER.count(chr(10)) + 1}: unknown field 'group_sizes' in .group_rollouts()" in line
    assert "(did you mean 'group_size'?)" in line
    allowed = line.split("allowed: ")[1].split(", ")
    assert {"group_size", "num_groups", "max_episode_steps", "few_shot"} <= set(allowed) and allowed == sorted(allowed)


def test_an_unknown_field_in_a_call_over_several_lines_is_reported_at_its_own_line(tmp_path, capsys):
    line = train_error(write_example(tmp_path, ".group_rollouts(\n    group_size=4,\n    num_groupz=2,\n)"), capsys)
    assert f"bad_example.py:{HEADER.count(chr(10)) + 3}: unknown field 'num_groupz' in .group_rollouts()" in line


def test_an_unknown_training_field_lists_rllib_and_llm_fields(tmp_path, capsys):
    line = train_error(write_example(tmp_path, ".training(step_advantage_weigth=1.0)"), capsys)
    assert "unknown field 'step_advantage_weigth' in .training() (did you mean 'step_advantage_weight'?)" in line
    assert "kl_coeff" in line and " lr," in line  # LLMConfig's own fields and RLlib's AlgorithmConfig ones
    ours, rllib = line.split("allowed: ")[1].split("; RLlib's: ")
    assert "step_advantage_weight" in ours and "lr" not in ours.split(", ")
    assert rllib.split(" and ")[0].split(", ") == ["gamma", "grad_clip", "grad_clip_by", "learner_connector", "lr",
                                                   "minibatch_size", "num_epochs",
                                                   "train_batch_size_per_learner"]
    assert rllib.endswith("more of RLlib's AlgorithmConfig.training()")


def test_an_unknown_env_config_key_is_one_line_before_ray_starts(tmp_path, capsys, monkeypatch):
    import rllib_llm.run.cli as cli

    def no_ray():
        raise AssertionError("Ray started for a config that cannot work")

    monkeypatch.setattr(cli, "init_ray", no_ray)
    body = '.environment("NumberLine", env_config={"max_positon": 3, "bogus": 1})'
    line = train_error(write_example(tmp_path, body), capsys)
    assert "env_config: unknown key 'max_positon' for NumberLine (did you mean 'max_position'?)" in line
    assert "env_config: unknown key 'bogus' for NumberLine;" in line and "max_position" in line.split("allowed: ")[1]


def test_an_unknown_env_name_is_one_line_with_a_suggestion_before_ray_or_a_run_folder(tmp_path, capsys, monkeypatch):
    import rllib_llm.run.cli as cli

    def no_ray():
        raise AssertionError("Ray started for a config that cannot work")

    monkeypatch.setattr(cli, "init_ray", no_ray)
    line = train_error(write_example(tmp_path, '.environment("NumberLin")'), capsys)
    assert "env: unknown env 'NumberLin' (did you mean 'NumberLine'?); registered: " in line
    registered = line.split("registered: ")[1]
    assert "Sokoban" in registered and "TicTacToe" in registered and "Points24SolverVerifier" in registered
    assert not (tmp_path / "run").exists()
    line = train_error(write_example(tmp_path, '.environment("TicTacToe")'), capsys)
    assert "env: 'TicTacToe' is a multi-agent env: train it with MultiAgentGRPOConfig" in line


def test_multi_agent_configs_check_their_env_name_too():
    from rllib_llm.multi_agent import MultiAgentGRPOConfig

    with pytest.raises(ValueError, match=r"unknown multi-agent env 'TicTacTo' \(did you mean 'TicTacToe'\?\)"):
        MultiAgentGRPOConfig().environment("TicTacTo").llm(model="tiny-random-llama").validate()
    with pytest.raises(ValueError, match="'NumberLine' is a single-agent env"):
        MultiAgentGRPOConfig().environment("NumberLine").llm(model="tiny-random-llama").validate()


def test_env_config_keys_are_checked_against_classes_factories_and_not_kwargs_envs():
    from rllib_llm.envs.gym_cards.number_line import NumberLineEnv
    from rllib_llm.envs.registry import env_config_errors

    assert env_config_errors("NumberLine", {"max_position": 3}) == []
    assert env_config_errors(NumberLineEnv, {"max_position": 3}) == []
    assert len(env_config_errors(NumberLineEnv, {"max_pos": 3})) == 1

    def factory(size: int = 3):
        return None

    assert env_config_errors(factory, {"size": 4}) == [] and "allowed: size" in env_config_errors(factory, {"x": 1})[0]
    assert env_config_errors(lambda **kwargs: None, {"anything": 1}) == []
    assert env_config_errors("NotARegisteredEnv-v9", {"anything": 1}) == []  # building it reports that


def test_a_builder_that_raises_gives_its_message_and_line(tmp_path, capsys):
    line = train_error(write_example(tmp_path, ".generation(temperature=0.0)"), capsys)
    assert "bad_example.py:7: temperature must be > 0" in line


def test_the_tuned_example_runner_exits_2_with_one_line(tmp_path, capsys):
    from tests.conftest import tiny_config

    with pytest.raises(SystemExit) as exit_info:
        run_example(tiny_config().training(policy_loss="nope"), {}, argv=["--no-tracking"], source="x.py")
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("python x.py: error: x.py: Invalid rllib-llm config: policy_loss must be one of")
    assert err.count("\n") == 1


def test_one_line():
    assert one_line("Invalid config:\n  - a bad\n  - b bad") == "Invalid config: a bad; b bad"
    assert one_line("plain") == "plain"

"""Tuned examples run as scripts (`python tuned_examples/x.py`) and the Tune sweep's param space."""

from __future__ import annotations

import ast
import math
import runpy
import sys
import types
from pathlib import Path

import pytest

from rllib_llm.run.cli import load_tuned_example
from rllib_llm.run.sweeps import format_summary, grid_param_space, grid_points, parse_grid, summarize
from tests.conftest import tiny_config

EXAMPLES = [*sorted(str(p) for p in Path("tuned_examples").glob("*.py")), "tests/fixtures/tiny_numberline.py"]


@pytest.mark.parametrize("path", EXAMPLES)
def test_main_block_calls_the_library_runner(path):
    """Every tuned example is a script: ``python tuned_examples/X.py`` (what ``ray job submit -- python ...``
    runs) trains it (10 of them used to exit 0 having done nothing)."""
    tree = ast.parse(Path(path).read_text())
    [main] = [node for node in tree.body if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)]
    runner = "sweep_main(config, param_grid, stop)" if path.endswith("_tune.py") else "run_example(config, stop)"
    assert runner in ast.unparse(main)


def test_python_tuned_example_parses_the_train_options(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["tests/fixtures/tiny_numberline.py", "--help"])
    with pytest.raises(SystemExit) as exit_info:
        runpy.run_path("tests/fixtures/tiny_numberline.py", run_name="__main__")
    assert exit_info.value.code == 0
    usage = capsys.readouterr().out
    assert usage.startswith("usage: python tests/fixtures/tiny_numberline.py")
    for option in ("--iterations", "--output", "--tracking-uri", "--experiment", "--no-tracking", "--wandb-project"):
        assert option in usage


def test_tune_example_exposes_a_valid_grid_over_its_base_config():
    config, stop = load_tuned_example("tuned_examples/numberline_gigpo_tune.py")
    module = sys.modules["tuned_example_numberline_gigpo_tune"]
    assert set(module.param_grid) == {"group_size", "lr"} and stop["training_iteration"] >= 1
    space = grid_param_space(config, module.param_grid)
    assert space.group_size == {"grid_search": module.param_grid["group_size"]}
    assert config.group_size == 2  # the base config (the main job's) is left alone


def test_grid_param_space_is_what_tune_expands():
    base = tiny_config()
    grid = {"group_size": [2, 4], "lr": [1e-3, 1e-4]}
    space = grid_param_space(base, grid)
    as_dict = space.to_dict()  # what tune.Tuner turns an AlgorithmConfig param_space into
    assert as_dict["group_size"] == {"grid_search": [2, 4]} and as_dict["lr"] == {"grid_search": [1e-3, 1e-4]}
    assert base.group_size == 2 and base.lr == 1e-3
    assert grid_points(grid) == [
        {"group_size": 2, "lr": 1e-3}, {"group_size": 2, "lr": 1e-4},
        {"group_size": 4, "lr": 1e-3}, {"group_size": 4, "lr": 1e-4},
    ]


@pytest.mark.parametrize(
    ("grid", "message"),
    [
        ({"group_size": [2, 0]}, "Grid point {'group_size': 0} is invalid:.*group_size must be an int >= 1"),
        ({"group_sise": [2]}, r"Unknown config field\(s\) in the grid: \['group_sise'\]"),
        ({"lr": []}, r"Grid field\(s\) \['lr'\] have no values"),
    ],
)
def test_grid_param_space_rejects_bad_grids_before_tune(grid, message):
    with pytest.raises(ValueError, match=message):
        grid_param_space(tiny_config(), grid)


def test_parse_grid():
    assert parse_grid(["group_size=4,8", "lr=1e-5, 5e-5", "step_grouping=exact,similarity"]) == {
        "group_size": [4, 8], "lr": [1e-5, 5e-5], "step_grouping": ["exact", "similarity"]}
    with pytest.raises(ValueError, match="FIELD=V1,V2"):
        parse_grid(["group_size"])


def test_summarize_picks_the_best_trial_by_success_rate():
    def result(group_size, lr, success, error=None):
        metrics = {} if success is None else {"env_runners": {"success_rate": success}, "training_iteration": 1}
        return types.SimpleNamespace(config={"group_size": group_size, "lr": lr}, metrics=metrics, error=error,
                                     path=f"/t/{group_size}-{lr}")

    grid = {"group_size": [2, 4], "lr": [0.1]}
    results = [result(2, 0.1, 0.25), result(4, 0.1, 0.75), result(8, 0.1, None, RuntimeError("boom"))]
    summary = summarize(results, grid)
    assert summary["best"]["group_size"] == 4 and summary["best"]["env_runners/success_rate"] == 0.75
    assert math.isnan(summary["trials"][2]["env_runners/success_rate"])
    text = format_summary(summary, grid)
    assert "ERROR RuntimeError: boom" in text
    assert text.endswith("Best trial by env_runners/success_rate (max): group_size=4, lr=0.1: 0.750 (/t/4-0.1)")
    # Any other metric a caller selects on is read from each trial's results too.
    for r, kl in zip(results[:2], (0.3, 0.1), strict=True):
        r.metrics["learners"] = {"default_policy": {"kl": kl}}
    by_kl = summarize(results, grid, metric="learners/default_policy/kl", mode="min")
    assert by_kl["best"]["group_size"] == 4 and by_kl["best"]["learners/default_policy/kl"] == 0.1


def test_help_is_plain_text_and_every_option_is_described():
    import argparse

    from rllib_llm.run.cli import build_parser

    parser = build_parser()
    assert "``" not in parser.format_help() and ":mod:" not in parser.format_help()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    for name, command in commands.items():
        assert "``" not in command.format_help()
        undescribed = [a.option_strings or a.dest for a in command._actions if a.dest != "help" and not a.help]
        assert undescribed == [], f"rllib-llm {name}: options without help: {undescribed}"


SINGLE_AGENT_EXAMPLES = sorted(
    str(p) for p in Path("tuned_examples").glob("*.py")
    if not p.name.startswith("multiagent_") and p.name not in {"sokoban_gigpo_vl.py", "numberline_gigpo_tune.py"}
)


@pytest.mark.parametrize("path", SINGLE_AGENT_EXAMPLES)
def test_every_single_agent_tuned_example_plays_its_env(path):
    """Each example's own env, env_config, prompts and memory, with the tiny model: the config validates,
    and one group plays one step with prompts that name the env's observation and a parsed action."""
    from rllib_llm.core.single_agent_env_runner import LLMEnvRunner
    from tests.fake_backends import ScriptedBackend

    config, stop = load_tuned_example(path)
    assert stop["training_iteration"] >= 1
    config = config.copy(copy_frozen=False)
    config.llm(model={"name_or_path": "tiny-random-llama", "lora": config.llm_model.get("lora")})
    config.group_rollouts(group_size=2, num_groups=1, max_episode_steps=1)
    config.validate()
    runner = LLMEnvRunner(config=config)
    try:
        runner.backend = ScriptedBackend(runner.module.tokenizer, ["<action>x</action>"])
        [episode, _] = runner.sample(seeds=[3])
        assert len(episode) == 1 and episode.custom_data  # one step played and recorded
        first_observation = str(episode.get_observations(0))
        prompt = runner.module.tokenizer.decode(episode.get_extra_model_outputs("prompt_ids")[0])
        assert first_observation.splitlines()[0][:20] in prompt
    finally:
        runner.stop()


def _tiny_model_for(path: str) -> str:
    return "tiny-random-qwen2.5-vl" if path.endswith("_vl.py") else "tiny-random-llama"


@pytest.mark.slow
@pytest.mark.parametrize("path", [p for p in EXAMPLES if not p.endswith("_tune.py")])
def test_every_tuned_example_trains_one_iteration_as_a_script(path, tmp_path):
    """``python tuned_examples/X.py --stop-iters 1`` (what ``ray job submit -- python tuned_examples/X.py``
    runs) trains: one progress row with a Learner result, a checkpoint, exit 0. Each example at its own sizes,
    env, prompts and algorithm; only the model is the tiny one (``--model``), since the real ones are not
    installed here."""
    import json
    import subprocess

    out = tmp_path / "run"
    cmd = [sys.executable, path, "--stop-iters", "1", "--no-eval", "--no-tracking", "--checkpoint-every", "0",
           "--model", _tiny_model_for(path), "--output", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    [row] = [json.loads(line) for line in (out / "progress.jsonl").read_text().splitlines()]
    assert row["iter"] == 1 and (out / "checkpoint").is_dir()
    if "num_groups_trained" in row and row["num_groups_trained"] == 0:
        # dynamic sampling (DAPO, dynamic GiGPO): the tiny model's groups all fail alike, none is informative,
        # so after its resampling rounds the iteration trains nothing and says so
        assert row["dynamic_sampling_rounds"] >= 1 and row["informative_group_fraction"] == 0
    else:
        assert any(key.startswith("learners/") for key in row)

"""`rllib-llm plot` (PNG learning curves) and `rllib-llm show-trajectory` (sampled trajectories as text)."""

from __future__ import annotations

import json
import math

import pytest

from rllib_llm.run.cli import main
from rllib_llm.run.plots import curve_figure, plot_runs, read_held_out, read_progress
from rllib_llm.run.progress import describe_group_id
from tests.run.conftest import png_size


def write_progress(run_dir, rows):
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "progress.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def row(i, success, kl=math.nan):
    return {"iter": float(i), "success": success, "return": success - 0.1, "resp_len": 5.0 + i, "kl": kl,
            "valid": 1.0, "entropy": 2.0}


def test_plot_of_a_trained_run_writes_valid_pngs(tracked_run, tmp_path, capsys):
    out = tmp_path / "plots"
    assert main(["plot", str(tracked_run["run_dir"]), "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    for stem in ("success_rate", "return", "response_length"):
        path = out / f"{stem}.png"
        assert path.stat().st_size > 1000 and png_size(path) == (600, 400)
        assert f"Wrote {path}" in printed
    assert not (out / "kl.png").exists()  # the tiny example trains without a KL term: nothing to draw


def test_plot_overlays_runs_and_reads_the_latest_training_of_each(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    write_progress(first, [row(1, 0.0), row(2, 0.2), row(1, 0.5), row(2, 0.6), row(3, 0.7)])  # rerun into a
    write_progress(second, [row(1, 0.1, kl=0.01), row(2, 0.3, kl=0.02)])
    assert [r["success"] for r in read_progress(first)] == [0.5, 0.6, 0.7]
    paths = plot_runs([first, second])
    assert {p.name for p in paths} == {"success_rate.png", "return.png", "response_length.png", "kl.png",
                                       "valid_action_rate.png", "entropy.png"}
    assert all(p.parent == first / "plots" and png_size(p) == (600, 400) for p in paths)


def test_the_success_plot_says_it_shows_training_episodes_and_marks_the_held_out_evaluations(tracked_run):
    import matplotlib.pyplot as plt

    run_dir, summary = tracked_run["run_dir"], tracked_run["summary"]
    held_out = read_held_out(run_dir)
    assert held_out == [(0.0, summary["before"]["success_rate"]), (1.0, summary["after"]["success_rate"])]
    fig = curve_figure("success_rate", {"run": read_progress(run_dir)}, {"run": held_out})
    ax = fig.axes[0]
    assert ax.get_title() == "success rate of the training episodes"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["run: training episodes", "run: held-out greedy (before / after)"]
    # one iteration: whole-number ticks and room around the points, not 0.96, 0.98, ... around a lone dot
    low, high = ax.get_xlim()
    assert low <= -1 and high >= 2
    assert all(float(t).is_integer() for t in ax.get_xticks())
    plt.close(fig)
    assert read_held_out(run_dir / "missing") == []


def test_plot_draws_any_metric_of_progress_jsonl_and_names_close_ones_for_a_typo(tracked_run, tmp_path, capsys):
    out = tmp_path / "any"
    name = "learners/default_policy/policy_loss"
    assert main(["plot", str(tracked_run["run_dir"]), "--output", str(out), "--metric", name,
                 "--metric", "success"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["learners-default_policy-policy_loss.png", "success_rate.png"]
    assert png_size(out / "learners-default_policy-policy_loss.png") == (600, 400)
    assert main(["plot", str(tracked_run["run_dir"]), "--metric", "learners/default_policy/policy_los"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "did you mean learners/default_policy/policy_loss" in err


def test_plot_errors_are_one_line(tmp_path, capsys):
    assert main(["plot", str(tmp_path / "missing")]) == 2
    assert "progress.jsonl not found" in capsys.readouterr().err
    write_progress(tmp_path / "empty", [{"iter": 1.0, "success": math.nan}])
    assert main(["plot", str(tmp_path / "empty")]) == 2
    assert "No metrics to plot" in capsys.readouterr().err


def test_training_saves_trajectories_and_show_trajectory_prints_them(tracked_run, capsys):
    run_dir = tracked_run["run_dir"]
    records = [json.loads(line) for line in (run_dir / "trajectories.jsonl").read_text().splitlines()]
    assert len(records) == 2 and {r["iteration"] for r in records} == {1}
    assert len({r["group_id"] for r in records}) == 2  # one episode of each group
    step = records[0]["steps"][0]
    assert step["prompt"].startswith("<|im_start|>system") and step["observation"] in step["prompt"]
    assert set(step) >= {"response", "action", "reward", "valid"}
    assert main(["show-trajectory", str(run_dir), "--index", "1"]) == 0
    text = capsys.readouterr().out
    assert text.count("=== iteration 1") == 1 and "--- step 1 ---" in text
    assert "prompt:\n  | <|im_start|>system" in text and "response: " in text
    assert "\naction: " in text and "  reward: " in text
    assert text.startswith("Group ids are <EnvRunner>-<rollout>-<group>")
    assert f"group {records[1]['group_id']} (EnvRunner 0, its rollout " in text
    assert records[0]["few_shot"] == [] and "few-shot" not in text  # the tiny example has none
    assert main(["show-trajectory", str(run_dir), "--no-prompts"]) == 0
    text = capsys.readouterr().out
    assert text.count("=== iteration 1") == 2 and "observation: Target" in text and "prompt:" not in text


def test_a_trajectory_with_few_shot_turns_labels_them():
    from rllib_llm.run.progress import format_trajectory

    step = {"t": 0, "observation": "Target 3, position 2.", "prompt": "...", "response": "+</action>", "action": "+",
            "valid": True, "reward": 1.0}
    record = {"iteration": 4, "group_id": "1-7-2", "seed": 5, "return": 1.0, "success": True, "steps": [step],
              "final_observation": "Target 3, position 3.", "few_shot": [["Target 1, position 3.", "<action>-</action>"]]}
    text = format_trajectory(record)
    assert "group 1-7-2 (EnvRunner 1, its rollout 7, group 2), seed 5" in text
    assert describe_group_id("1r2-0-3") == "1r2-0-3 (EnvRunner 1 after restart 2, its rollout 0, group 3)"
    assert ("(each prompt opens with the config's few-shot example, not an earlier step: user 'Target 1, position 3.' "
            "-> assistant '<action>-</action>')") in text
    assert "few-shot" not in format_trajectory(record, prompts=False)  # observations only: no few-shot turn shown


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--iteration", "7"], "recorded iterations: [1]"), (["--index", "5"], "--index must be in [0, 1]")],
)
def test_show_trajectory_errors_name_what_exists(tracked_run, capsys, args, message):
    assert main(["show-trajectory", str(tracked_run["run_dir"]), *args]) == 2
    assert message in capsys.readouterr().err


def test_the_recorder_is_an_on_train_result_callback_writing_the_trained_episodes(tmp_path):
    import pickle
    from types import SimpleNamespace

    from ray.rllib.env.single_agent_episode import SingleAgentEpisode

    from rllib_llm.algorithms.config import LLMConfig
    from rllib_llm.columns import GROUP_ID, PROMPT, RESPONSE_TEXT
    from rllib_llm.run.trajectory_recorder import TrajectoryRecorder, record_trajectories

    def episode(group: str, word: str) -> SingleAgentEpisode:
        ep = SingleAgentEpisode(observations=["start"], infos=[{}], len_lookback_buffer=0)
        ep.add_env_step("end", word, 1.0, infos={"won": True}, terminated=True,
                        extra_model_outputs={PROMPT: [104, 105], RESPONSE_TEXT: word})  # fmt: skip
        ep.custom_data[GROUP_ID] = group
        return ep

    config = LLMConfig()
    record_trajectories(config, tmp_path / "t.jsonl", per_iteration=2)
    (recorder,) = config.callbacks_on_train_result
    assert isinstance(recorder, TrajectoryRecorder)
    pickle.loads(pickle.dumps(config))  # travels to Tune trials and workers
    tokenizer = SimpleNamespace(decode=lambda ids: bytes(ids).decode())
    algo = SimpleNamespace(
        training_episodes=[episode("0-0-0", "a"), episode("0-0-0", "b"), episode("0-0-1", "c")],
        iteration=7,
        config=config,
        env_runner=SimpleNamespace(module=SimpleNamespace(tokenizer=tokenizer)),
    )
    recorder(algorithm=algo, metrics_logger=None, result={})
    records = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    # one episode per group first (a, then c), the iteration the callback ran after, prompts decoded
    assert [r["steps"][0]["action"] for r in records] == ["a", "c"]
    assert {r["iteration"] for r in records} == {7} and records[0]["steps"][0]["prompt"] == "hi"

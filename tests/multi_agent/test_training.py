"""One training iteration of each multi-agent tuned example on the tiny model: per-agent metrics, weight sync
of every module, evaluation and checkpoints."""

import json
import random

import numpy as np
import pytest

from rllib_llm.run.cli import load_tuned_example
from tests.fake_backends import PolicyBackend

pytestmark = pytest.mark.usefixtures("ray_session")

TICTACTOE = "tuned_examples/multiagent_tictactoe_grpo.py"
POINTS24 = "tuned_examples/multiagent_points24_gigpo.py"


def tiny(path: str, **group_rollouts):
    """The tuned example's config with the tiny model and small sizes (its modules, mapping and prompts kept)."""
    config, stop = load_tuned_example(path)
    assert stop["training_iteration"] >= 1
    settings = {"group_size": 2, "num_groups": 2, "max_episode_steps": 4, **group_rollouts}
    return (
        config.llm(model="tiny-random-llama")
        .generation(max_new_tokens=6)
        .group_rollouts(**settings)
        .training(lr=1e-3, minibatch_size=16)
        .evaluation(evaluation_num_seeds=2)
    )


def random_legal_move(seed: int, response_prefix: str = ""):
    """A random legal move; the reply leaves out what the prompt already prefilled (e.g. "<action>")."""
    rng = random.Random(seed)

    def policy(prompt: str) -> str:
        moves = prompt.rsplit("Legal moves: ", 1)[-1].split(".")[0].split(", ")
        return f"<action>{rng.choice(moves)}</action>".removeprefix(response_prefix)

    return policy


def learner_weights(algo, module_id):
    path = f"learner/rl_module/{module_id}"
    return algo.learner_group.get_state(components=path)["learner"]["rl_module"][module_id]


@pytest.fixture(scope="module")
def algo(ray_session):
    algo = tiny(TICTACTOE, max_episode_steps=10).build_algo()
    yield algo
    algo.stop()


def test_one_iteration_trains_both_players_and_syncs_them_to_the_env_runner(algo):
    """Scripted random legal moves (the tiny model never writes one), so both players act and games differ."""
    runner = algo.env_runner
    for i, module_id in enumerate(("x_player", "o_player")):
        runner.module[module_id].generation_backend = PolicyBackend(
            runner.module[module_id].tokenizer, random_legal_move(i, algo.config.response_prefix)
        )
    before = {m: {k: v.copy() for k, v in learner_weights(algo, m).items()} for m in ("x_player", "o_player")}
    result = algo.train()
    env = result["env_runners"]
    for key in ("success_rate", "valid_action_rate", "episode_return_mean", "num_generate_calls"):
        assert key in env
    for agent in ("agent_player_1", "agent_player_2"):
        assert {"success_rate", "valid_action_rate", "episode_return_mean", "episode_len_mean"} <= set(env[agent])
        assert env[agent]["valid_action_rate"] == 1.0
    for module_id in ("x_player", "o_player"):
        assert {"policy_loss", "entropy"} <= set(result["learners"][module_id])
        after = learner_weights(algo, module_id)
        assert any(not np.allclose(before[module_id][k], after[k]) for k in after), module_id
        synced = runner.module[module_id].get_state(inference_only=True)
        assert synced and all("lora" in k for k in synced)  # only the adapters travel to the env runner
        for key, value in synced.items():
            np.testing.assert_allclose(value, after[key], rtol=1e-6)


def test_evaluation_is_per_agent_and_checkpoints_restore_every_module(algo, tmp_path):
    from ray.rllib.algorithms.algorithm import Algorithm

    stats = algo.evaluate_seeds([7, 8])
    assert stats["num_episodes"] == 2 and {"success_rate", "valid_action_rate", "episode_return_mean"} <= set(stats)
    assert {"agent_player_1/success_rate", "agent_player_1/valid_action_rate"} <= set(stats)
    assert all(isinstance(v, (int, float)) for v in stats.values())  # the CLI logs each as one number
    restored = Algorithm.from_checkpoint(algo.save_to_path(str(tmp_path / "ckpt")))
    try:
        for module_id in ("x_player", "o_player"):
            original, loaded = learner_weights(algo, module_id), learner_weights(restored, module_id)
            for key in original:
                np.testing.assert_allclose(original[key], loaded[key])
        assert restored.evaluate_seeds([7])["num_episodes"] == 1
    finally:
        restored.stop()


def test_one_iteration_of_the_shared_llm_solver_verifier_example():
    """The tiny model's own generations this time (mostly invalid formulas, so mostly the solver acts)."""
    algo = tiny(POINTS24, max_episode_steps=2).build_algo()
    try:
        assert list(algo.env_runner.module.keys()) == ["team"]
        result = algo.train()
        env = result["env_runners"]
        assert {"success_rate", "valid_action_rate", "episode_return_mean"} <= set(env["agent_solver"])
        assert env["num_generate_calls"] == 2  # one shared module, one call per step
        assert "team" in result["learners"] and "policy_loss" in result["learners"]["team"]
    finally:
        algo.stop()


def test_cli_trains_and_evaluates_a_multi_agent_example(tmp_path, capsys):
    from rllib_llm.run.cli import main

    out = tmp_path / "run"
    args = ["train", "tests/multi_agent/fixtures/tiny_tictactoe.py", "--output", str(out), "--no-tracking"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    records = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    assert records and {r["agent_id"] for r in records} <= {"player_1", "player_2"}
    assert "Untrained policy: success rate" in printed and "Trained policy" in printed
    [head] = [line for line in printed.splitlines() if line.lstrip().startswith("iter")]
    for column in ("p1:succ", "p1:valid", "p2:ret"):  # short labels; progress.jsonl keeps the full names
        assert column in head.split()
    [row] = [json.loads(line) for line in (out / "progress.jsonl").read_text().splitlines()]
    assert 0.0 <= row["player_1:valid"] <= 1.0 and row["player_2:success"] in (None, 0.0, 0.5, 1.0)
    summary = json.loads((out / "summary.json").read_text())
    assert "agent_player_1/valid_action_rate" in summary["after"]
    assert main(["evaluate", summary["checkpoint"], "--num-seeds", "2", "--example",
                 "tests/multi_agent/fixtures/tiny_tictactoe.py"]) == 0  # fmt: skip
    assert "over 2 held-out seeds" in capsys.readouterr().out
    assert main(["show-trajectory", str(out), "--no-prompts"]) == 0
    assert f"agent {records[0]['agent_id']} (module {records[0]['module_id']})" in capsys.readouterr().out


def test_remote_env_runners_play_and_get_every_modules_weights():
    config = tiny(TICTACTOE, max_episode_steps=4).env_runners(num_env_runners=1, num_cpus_per_env_runner=0.5)
    algo = config.build_algo()
    try:
        result = algo.train()
        assert {"agent_player_1"} <= set(result["env_runners"])
        remote = algo.env_runner_group.foreach_env_runner(
            lambda runner: {m: runner.module[m].get_state(inference_only=True) for m in ("x_player", "o_player")},
            local_env_runner=False,
        )
        [states] = remote
        for module_id in ("x_player", "o_player"):
            learner = learner_weights(algo, module_id)
            assert states[module_id] and all("lora" in k for k in states[module_id])
            for key, value in states[module_id].items():
                np.testing.assert_allclose(value, learner[key], rtol=1e-6)
        assert "agent_player_1/valid_action_rate" in algo.evaluate_seeds([7, 8])
    finally:
        algo.stop()

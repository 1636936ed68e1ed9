"""The multi-agent env runner: same-seed groups, one generate call per module per step, per-agent records."""

import pickle
import re
import time

import numpy as np
import pytest

from rllib_llm.columns import ACTION_LOGP, ANCHOR, ENV_FAULTS, GROUP_ID, PROMPT, RESPONSE, VALID
from rllib_llm.metrics import NUM_ENV_FAULTS
from rllib_llm.multi_agent import AgentToModule, LLMMultiAgentEnvRunner
from tests.fake_backends import PolicyBackend
from tests.multi_agent.conftest import CoordinationEnv, first_legal_move, tiny_multi_agent_config


@pytest.fixture(scope="module")
def tictactoe_runner():
    """player_1 -> module "x", player_2 -> module "o"; two random openings per seed."""
    config = tiny_multi_agent_config(env_config={"opening_moves": 2}, max_episode_steps=12)
    config.validate()
    return LLMMultiAgentEnvRunner(config=config)


@pytest.fixture(scope="module")
def coordination_runner():
    """A parallel env, both agents on one shared module; agent b has its own prompt."""
    config = tiny_multi_agent_config(env=CoordinationEnv, policies=("shared",), mapping=AgentToModule(default="shared"))
    config.agents(agent_prompts={"b": "ROLE-B PROMPT. {current_observation} <action></action>"})
    config.validate()
    return LLMMultiAgentEnvRunner(config=config)


def scripted(runner, policy):
    for m in runner.module.keys():
        runner.module[m].generation_backend = PolicyBackend(runner.module[m].tokenizer, policy)
    return runner.backends


def test_groups_share_their_seed_and_differ_from_each_other(tictactoe_runner):
    scripted(tictactoe_runner, first_legal_move)
    episodes = tictactoe_runner.sample(seeds=[1, 2])
    first = [ep.agent_episodes["player_1"].get_observations(0) for ep in episodes]
    assert first[0] == first[1] and first[2] == first[3] and first[0] != first[2]
    groups = [ep.custom_data[GROUP_ID] for ep in episodes]
    assert groups[0] == groups[1] != groups[2] == groups[3]
    for ep in episodes:
        assert {a.custom_data[GROUP_ID] for a in ep.agent_episodes.values()} == {ep.custom_data[GROUP_ID]}
    # episodes travel to Learners (Ray pickles them): the mapping fn they hold must not drag the runner along
    assert len(pickle.dumps(episodes)) < 1_000_000


def test_turn_based_agents_use_their_own_module_once_per_step(tictactoe_runner):
    backends = scripted(tictactoe_runner, first_legal_move)
    episodes = tictactoe_runner.sample(seeds=[1, 2])
    # Lock step and legal moves: every env waits on the same player, so each step is one call of one module,
    # and the two modules alternate.
    calls_x, calls_o = backends["x"].calls, backends["o"].calls
    assert calls_x and calls_o and all(n <= 4 for n in calls_x + calls_o)
    assert abs(len(calls_x) - len(calls_o)) <= 1
    agent_steps = sum(len(a) for ep in episodes for a in ep.agent_episodes.values())
    assert sum(calls_x) + sum(calls_o) == agent_steps
    assert len(calls_x) + len(calls_o) == max(len(ep) for ep in episodes)  # one call per env step, not per env
    assert tictactoe_runner.get_metrics()["num_generate_calls"] == len(calls_x) + len(calls_o)
    for ep in episodes:
        assert ep.is_terminated
        assert {aid: a.module_id for aid, a in ep.agent_episodes.items()} == {"player_1": "x", "player_2": "o"}


def test_the_loser_is_paid_when_the_winner_moves(tictactoe_runner):
    scripted(tictactoe_runner, first_legal_move)
    episodes = tictactoe_runner.sample(seeds=[3])
    for ep in episodes:
        p1, p2 = ep.agent_episodes["player_1"], ep.agent_episodes["player_2"]
        returns = sorted([p1.get_return(), p2.get_return()])
        won = [a.get_infos(-1)["won"] for a in (p1, p2)]
        assert returns in ([-1.0, 1.0], [0.0, 0.0]) and sum(won) == (returns == [-1.0, 1.0])
        for agent in (p1, p2):
            n = len(agent)
            for key in (PROMPT, RESPONSE, ACTION_LOGP, ANCHOR, VALID):
                assert len(agent.get_extra_model_outputs(key)) == n


def test_invalid_responses_are_penalized_noops_and_episodes_truncate(tictactoe_runner):
    scripted(tictactoe_runner, lambda prompt: "I resign")
    episodes = tictactoe_runner.sample(seeds=[4])
    for ep in episodes:
        player = ep.agent_episodes["player_1"]
        assert ep.is_truncated and len(player) == tictactoe_runner.config.max_episode_steps
        assert "player_2" not in ep.agent_episodes or len(ep.agent_episodes["player_2"]) == 0
        assert not any(player.get_extra_model_outputs(VALID))
        assert player.get_rewards() == pytest.approx([0.0] * len(player))  # the env's; the Learner penalizes
        assert all(a == "(invalid)" for a in player.get_actions())
    metrics = tictactoe_runner.get_metrics()
    assert metrics["agent_player_1"]["valid_action_rate"] == 0.0
    # player_2 never moved: its metrics exist (so the progress table has its columns) but are NaN, not 0.
    assert set(metrics["agent_player_2"]) == set(metrics["agent_player_1"])
    assert all(np.isnan(float(v)) for v in metrics["agent_player_2"].values())


def test_parallel_agents_sharing_a_module_are_one_generate_call(coordination_runner):
    (backend,) = scripted(coordination_runner, lambda prompt: "<action>7</action>").values()
    episodes = coordination_runner.sample(seeds=[10, 11])
    assert backend.calls == [8, 8]  # 2 agents x 4 envs per step, 2 rounds
    for ep in episodes:
        assert ep.is_terminated and ep.get_return() == 4.0
        assert all(a.module_id == "shared" for a in ep.agent_episodes.values())
    metrics = coordination_runner.get_metrics()
    assert metrics["agent_a"]["success_rate"] == metrics["agent_b"]["success_rate"] == 1.0
    assert metrics["success_rate"] == 1.0 and metrics["episode_return_mean"] == 4.0


def test_each_agent_has_its_own_prompt_and_memory(coordination_runner):
    tokenizer = coordination_runner.module["shared"].tokenizer
    scripted(
        coordination_runner, lambda prompt: "<action>1</action>" if "you are a" in prompt else "<action>2</action>"
    )
    episodes = coordination_runner.sample(seeds=[12])
    a, b = episodes[0].agent_episodes["a"], episodes[0].agent_episodes["b"]
    prompt_a, prompt_b = (tokenizer.decode(ep.get_extra_model_outputs(PROMPT, -1)) for ep in (a, b))
    assert "ROLE-B PROMPT" in prompt_b and "ROLE-B PROMPT" not in prompt_a
    # the sliding-window memory of agent a holds a's own past action only
    history_a = re.findall(r"action: (\d)", prompt_a)
    assert history_a == ["1"]
    assert np.all(np.array(a.get_rewards()) == 0.0)  # the digits never matched


def test_env_exception_truncates_the_episode_and_replaces_the_env(tictactoe_runner, monkeypatch):
    scripted(tictactoe_runner, first_legal_move)
    broken = tictactoe_runner.adapters[0]

    def boom(actions):
        raise RuntimeError("env crashed")

    monkeypatch.setattr(broken, "step", boom)
    episodes = tictactoe_runner.sample(seeds=[5])
    player = episodes[0].agent_episodes["player_1"]
    assert episodes[0].is_truncated and len(player) == 1 and "env_error" in player.get_infos(-1)
    # The env's fault, not the model's: the parsed move stays valid (no penalty), as in the single-agent runner.
    assert player.get_extra_model_outputs(VALID) == [True] and player.get_rewards() == [0.0]
    assert episodes[0].custom_data[ENV_FAULTS] == 1 and episodes[1].custom_data[ENV_FAULTS] == 0
    assert tictactoe_runner.adapters[0] is not broken and not episodes[1].is_truncated


def test_mapping_to_an_unknown_module_is_a_clear_error(tictactoe_runner, monkeypatch):
    monkeypatch.setattr(tictactoe_runner, "_mapping", AgentToModule(default="nobody"))
    with pytest.raises(ValueError, match="'nobody'"):
        tictactoe_runner.sample(seeds=[6])


def test_trajectory_records_are_one_per_agent(coordination_runner):
    from rllib_llm.run.progress import episode_records

    scripted(coordination_runner, lambda prompt: "<action>3</action>")
    (episode,) = coordination_runner.sample(seeds=[13], group_size=1)
    tokenizer = coordination_runner.module["shared"].tokenizer
    records = episode_records(episode, 1, lambda ids: tokenizer.decode(ids))
    assert [(r["agent_id"], r["module_id"]) for r in records] == [("a", "shared"), ("b", "shared")]
    for record in records:
        assert record["seed"] == 13 and record["return"] == 2.0 and len(record["steps"]) == 2
        assert record["steps"][0]["action"] == "3" and "round 1" in record["steps"][0]["prompt"]


def test_response_prefix_is_prefilled_for_every_agent():
    """``response_prefix="<action>"``: each agent's prompt ends with the prefix's ids and its move is parsed
    from prefix + reply (the reply alone, "5</action>", holds no action)."""
    from rllib_llm.env_connectors.prompts import response_prefix_ids

    def bare_move(prompt: str) -> str:
        return first_legal_move(prompt).removeprefix("<action>")

    runners = {}
    for prefix in ("<action>", ""):
        config = tiny_multi_agent_config(env_config={"opening_moves": 2}, max_episode_steps=6)
        config.group_rollouts(response_prefix=prefix)
        config.validate()
        runners[prefix] = LLMMultiAgentEnvRunner(config=config)
        scripted(runners[prefix], bare_move)
    prefix_ids = response_prefix_ids(runners["<action>"].module["x"].tokenizer, "<action>")
    assert prefix_ids
    for ep in runners["<action>"].sample(seeds=[5]):
        for agent in ep.agent_episodes.values():
            assert all(list(p)[-len(prefix_ids):] == prefix_ids for p in agent.get_extra_model_outputs(PROMPT))
            assert all(agent.get_extra_model_outputs(VALID))
    for ep in runners[""].sample(seeds=[5]):
        assert not any(v for a in ep.agent_episodes.values() for v in a.get_extra_model_outputs(VALID))


@pytest.fixture
def timeout_runner():
    """A fresh runner with env-call timeouts (the faults below replace its envs)."""
    config = tiny_multi_agent_config(env_config={"opening_moves": 2}, max_episode_steps=12, env_step_timeout_s=0.5)
    config.validate()
    runner = LLMMultiAgentEnvRunner(config=config)
    scripted(runner, first_legal_move)
    yield runner
    runner.stop()


def test_a_hung_env_step_times_out_truncates_its_episode_and_is_counted(timeout_runner, monkeypatch):
    hung = timeout_runner.adapters[0]
    monkeypatch.setattr(hung, "step", lambda actions: time.sleep(30))
    start = time.perf_counter()
    episodes = timeout_runner.sample(seeds=[5])
    assert time.perf_counter() - start < 10
    assert episodes[0].is_truncated and "took longer than 0.5 s" in next(
        ep.get_infos(-1)["env_error"] for ep in episodes[0].agent_episodes.values() if len(ep)
    )
    assert timeout_runner.adapters[0] is not hung and not episodes[1].is_truncated
    assert timeout_runner.get_metrics()[NUM_ENV_FAULTS] == 1


def test_a_failed_reset_is_retried_on_a_fresh_env_and_counted_on_its_episode(timeout_runner, monkeypatch):
    broken = timeout_runner.adapters[1]

    def boom(seed):
        raise RuntimeError("reset crashed")

    monkeypatch.setattr(broken, "reset", boom)
    episodes = timeout_runner.sample(seeds=[3])
    assert timeout_runner.adapters[1] is not broken
    assert [ep.custom_data[ENV_FAULTS] for ep in episodes] == [0, 1]
    # the retried env reset with the group's seed: both episodes start from the same board
    first = [ep.agent_episodes["player_1"].get_observations(0) for ep in episodes]
    assert first[0] == first[1] and all(ep.is_done for ep in episodes)


def test_multi_agent_rollouts_report_the_same_response_fault_metrics_as_single_agent(timeout_runner):
    from rllib_llm.metrics import EMPTY_RESPONSE_RATE, TRUNCATED_RESPONSE_RATE, UNDECODABLE_RESPONSE_RATE

    scripted(timeout_runner, lambda prompt: "")  # every reply empty: invalid, and counted as such
    timeout_runner.sample(seeds=[2])
    metrics = timeout_runner.get_metrics()
    assert metrics[EMPTY_RESPONSE_RATE] == 1.0 and metrics["valid_action_rate"] == 0.0
    assert metrics[TRUNCATED_RESPONSE_RATE] == 0.0 and metrics[UNDECODABLE_RESPONSE_RATE] == 0.0


def test_each_module_samples_with_its_own_vllm_engine_and_receives_its_own_weights(monkeypatch):
    """``.generation(backend="vllm")`` in a multi-agent system (a fake vllm package): one engine per module,
    each module's agents answered by its engine, and a weight sync reaching each engine with its module's
    weights (issue 23's multi-agent case)."""
    import torch
    from ray.rllib.core import COMPONENT_RL_MODULE

    from tests.fake_backends import install_fake_vllm

    install_fake_vllm(monkeypatch)
    config = tiny_multi_agent_config(env_config={"opening_moves": 2}, max_episode_steps=3).generation(backend="vllm")
    runner = LLMMultiAgentEnvRunner(config=config)
    engines = {m: backend.llm for m, backend in runner.backends.items()}
    assert set(engines) == {"x", "o"} and engines["x"] is not engines["o"]
    episodes = runner.sample(seeds=[3])
    # The fake engine's replies are no moves, so player_1 (module x) keeps the turn: only x's engine is asked,
    # once per step for both episodes' player_1 together.
    assert [len(call["prompts"]) for call in engines["x"].calls] == [2, 2, 2] and not engines["o"].calls
    assert all(set(ep.agent_episodes) == {"player_1"} for ep in episodes)
    weights = {m: runner.module[m].get_state() for m in ("x", "o")}
    weights["o"] = {k: v + 1.0 if k.endswith("lm_head.weight") else v for k, v in weights["o"].items()}
    runner.set_state({COMPONENT_RL_MODULE: weights})
    for module_id, llm in engines.items():
        loaded = dict(llm.engine_model.loaded)
        head = next(v for k, v in loaded.items() if k.endswith("lm_head.weight"))
        expected = next(torch.as_tensor(v) for k, v in weights[module_id].items() if k.endswith("lm_head.weight"))
        torch.testing.assert_close(head, expected)

"""Helpers of the multi-agent tests: a prompt-reading scripted backend, a tiny parallel env, tiny configs."""

from __future__ import annotations

import re

from pettingzoo import ParallelEnv

from rllib_llm.envs.multi_agent import text_space
from rllib_llm.multi_agent import AgentToModule, MultiAgentGRPOConfig


def first_legal_move(prompt: str) -> str:
    """A tic-tac-toe policy: the first legal move listed in the prompt."""
    moves = re.findall(r"Legal moves: ([\d, ]+)\.", prompt)
    return f"<action>{moves[-1].split(',')[0].strip()}</action>" if moves else "no move"


class CoordinationEnv(ParallelEnv):
    """Two agents say a digit at once for ``rounds`` rounds; both earn 1 when the digits match."""

    metadata = {"name": "coordination_v0"}
    possible_agents = ["a", "b"]

    def __init__(self, rounds: int = 2) -> None:
        self.rounds, self.space = rounds, text_space()
        self.agents: list[str] = []

    def observation_space(self, agent):
        return self.space

    def action_space(self, agent):
        return self.space

    def reset(self, seed=None, options=None):
        self.agents, self.t, self.seed = list(self.possible_agents), 0, seed
        return {a: f"Game {seed}, round 1, you are {a}." for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        valid = {a: isinstance(x, str) and x.strip().isdigit() for a, x in actions.items()}
        match = all(valid.values()) and len({actions[a].strip() for a in actions}) == 1
        done = self.t >= self.rounds
        obs = {
            a: f"Game {self.seed}, round {self.t + 1}, you are {a}; last you said {actions[a]}." for a in self.agents
        }
        rewards = {a: float(match) for a in self.agents}
        infos = {a: {"is_action_valid": valid[a], "won": match and done} for a in self.agents}
        flags = dict.fromkeys(self.agents, done)
        if done:
            self.agents = []
        return obs, rewards, flags, dict.fromkeys(flags, False), infos


def tiny_multi_agent_config(env="TicTacToe", env_config=None, policies=("x", "o"), mapping=None, **group_rollouts):
    settings = {"group_size": 2, "num_groups": 2, "max_episode_steps": 6, **group_rollouts}
    return (
        MultiAgentGRPOConfig()
        .environment(env, env_config=env_config or {})
        .llm(model="tiny-random-llama")
        .generation(max_new_tokens=6)
        .group_rollouts(**settings)
        .multi_agent(
            policies=set(policies), policy_mapping_fn=mapping or AgentToModule({"player_1": "x", "player_2": "o"})
        )
        .training(lr=1e-3, minibatch_size=16)
        .evaluation(evaluation_num_seeds=2)
        .debugging(seed=0)
    )

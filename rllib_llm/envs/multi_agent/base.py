"""The contract of a multi-agent LLM environment: a PettingZoo env (AEC or parallel) with text in and out.

It extends the single-agent contract of :mod:`rllib_llm.envs.base` agent by agent:

- observations are text (or ``{"text", "image"}``) per agent; actions are the strings the agent wrote
  inside ``<action>...</action>`` (``None`` when the response had none: the env treats it as an invalid
  no-op, never a crash);
- ``reset(seed=s)`` is deterministic in ``s`` (group rollouts reset ``group_size`` copies with one seed);
- after every step ``infos[agent]`` of the agent that acted holds ``is_action_valid`` (the env runner then
  applies the invalid-action penalty), and each agent's info may hold ``won``, ``anchor_obs`` (GiGPO's state
  key), ``available_actions`` and ``prompt_slots`` (extra template slots), as in the single-agent contract;
- ``rewards`` (AEC) are the rewards of the last step, for every agent; an agent that did not act may still
  be paid (the loser of a tic-tac-toe game is, when the winner moves): RLlib's ``MultiAgentEpisode`` adds
  such rewards to the agent's last action;
- optional per-agent prompt data: ``prompt_templates`` (agent id -> template; ``prompt_template`` is the
  fallback), ``task_descriptions`` (agent id -> text, set by ``reset``) and ``action_format``
  (``"tags"`` or ``"raw"``, as single-agent envs).

:class:`TextAECEnv` is a base class for turn-based games that keeps PettingZoo's bookkeeping in one place.
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
from pettingzoo import AECEnv

from rllib_llm.envs.base import TextEnv


def text_space(max_length: int = TextEnv.max_text_length) -> gym.spaces.Text:
    """The Text space of observations and actions (printable ASCII plus newline and tab), as TextEnv."""
    charset = "".join(chr(i) for i in range(32, 127)) + "\n\t"
    return gym.spaces.Text(max_length=max_length, charset=charset)


def agent_prompt_template(env: Any, agent: str) -> Any:
    """The env's template for ``agent``: ``prompt_templates[agent]``, else ``prompt_template``, else the
    single-agent default (so any PettingZoo env with text observations can be prompted)."""
    templates = getattr(env, "prompt_templates", None) or {}
    return templates.get(agent) or getattr(env, "prompt_template", None) or TextEnv.prompt_template


def agent_task_description(env: Any, agent: str) -> str:
    descriptions = getattr(env, "task_descriptions", None) or {}
    return descriptions.get(agent, getattr(env, "task_description", ""))


class TextAECEnv(AECEnv):
    """Turn-based text game: subclasses implement ``_new_game(rng)``, ``observe(agent)`` and
    ``_play(agent, action) -> (valid, next_agent | None)``, calling :meth:`_finish` when the game ends.

    An invalid action is a no-op; who moves next is the subclass's choice (usually the same agent, with
    feedback in its next observation). ``max_steps`` bounds a game that never ends (truncation).
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"], "name": "text_aec_v0", "is_parallelizable": False}
    possible_agents: ClassVar[list[str]] = []
    prompt_templates: ClassVar[dict[str, str]] = {}
    action_format: ClassVar[str] = "tags"

    def __init__(self, max_steps: int = 30) -> None:
        super().__init__()
        self.possible_agents = list(type(self).possible_agents)
        self.max_steps = max_steps
        self._space = text_space()
        self.agents: list[str] = []
        self.task_descriptions: dict[str, str] = {}
        self.num_steps = 0

    def observation_space(self, agent: str) -> gym.Space:
        return self._space

    def action_space(self, agent: str) -> gym.Space:
        return self._space

    # --- to implement --------------------------------------------------------------------------------

    def _new_game(self, seed: int | None) -> str:
        """Sets up a game from ``seed`` (fills ``task_descriptions``); returns the agent to move first."""
        raise NotImplementedError

    def _play(self, agent: str, action: str | None) -> tuple[bool, str | None]:
        """Applies ``agent``'s action: (valid, the agent to move next); None once :meth:`_finish` ended it."""
        raise NotImplementedError

    def _agent_info(self, agent: str) -> dict[str, Any]:
        """The info of ``agent`` (``won``, ``anchor_obs``, ``available_actions``, ``prompt_slots``...)."""
        return {}

    # --- PettingZoo AEC plumbing ---------------------------------------------------------------------

    def reset(self, seed: int | None = None, options: dict | None = None) -> None:
        self.agents = list(self.possible_agents)
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.num_steps = 0
        self._won = dict.fromkeys(self.agents, False)
        self.agent_selection = self._new_game(seed)
        self.infos = {a: {"is_action_valid": True, **self._info(a)} for a in self.agents}

    def _info(self, agent: str) -> dict[str, Any]:
        return {"won": self._won[agent], **self._agent_info(agent)}

    def _finish(self, rewards: dict[str, float], winners: tuple[str, ...] = (), truncated: bool = False) -> None:
        """Ends the game: pays ``rewards`` (on top of what this step already paid), marks ``winners`` as won,
        terminates (or truncates) every agent."""
        for agent in self.agents:
            self.rewards[agent] += float(rewards.get(agent, 0.0))
            self._won[agent] = agent in winners
            (self.truncations if truncated else self.terminations)[agent] = True

    def step(self, action: str | None) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        self._cumulative_rewards[agent] = 0.0
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self.num_steps += 1
        valid, next_agent = self._play(agent, action if isinstance(action, str) else None)
        if next_agent is not None and self.num_steps >= self.max_steps:
            self._finish({}, truncated=True)
        self.agent_selection = next_agent or agent
        self.infos = {a: {"is_action_valid": valid if a == agent else True, **self._info(a)} for a in self.agents}
        self._accumulate_rewards()

    def close(self) -> None:
        pass

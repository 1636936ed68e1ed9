"""One stepping interface over PettingZoo's two APIs, in the shape RLlib's ``MultiAgentEpisode`` records.

The env runner asks an adapter who acts now (:meth:`PettingZooAdapter.agents_to_act`), steps it with one
action per acting agent and gets a :class:`Transition` whose observations are exactly those RLlib expects:
the next observation of every agent that acts next, plus a final observation of every agent that is done
now (and only then its terminated/truncated flag). For an AEC env that is the agent whose turn it is (the
others' actions stay "hanging" in the episode until their turn comes back, collecting the rewards paid in
between); for a parallel env, every live agent.

Envs are named like single-agent ones: an alias of :func:`register_multi_agent_env`, a class, or a factory.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pettingzoo import AECEnv, ParallelEnv

from rllib_llm.envs.registry import unknown_name_error
from rllib_llm.registry import Registry

ALL = "__all__"


@dataclass
class Transition:
    """What one env step returned, as dicts keyed by agent id (see module docstring)."""

    observations: dict[str, Any]
    rewards: dict[str, float]
    terminateds: dict[str, bool] = field(default_factory=dict)
    truncateds: dict[str, bool] = field(default_factory=dict)
    #: Infos of every agent the env reported (the acting agents' ``is_action_valid`` is read here).
    infos: dict[str, dict] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return bool(self.terminateds.get(ALL) or self.truncateds.get(ALL))


class PettingZooAdapter:
    """Steps an AEC or a parallel PettingZoo env with ``{agent: action}`` dicts (see module docstring)."""

    def __init__(self, env: AECEnv | ParallelEnv) -> None:
        if not isinstance(env, (AECEnv, ParallelEnv)):
            raise TypeError(f"Expected a PettingZoo AECEnv or ParallelEnv, got {type(env).__name__}")
        self.env = env
        self.is_aec = isinstance(env, AECEnv)
        self._last_obs: dict[str, Any] = {}

    @property
    def possible_agents(self) -> list[str]:
        return list(self.env.possible_agents)

    def reset(self, seed: int | None) -> tuple[dict[str, Any], dict[str, dict]]:
        """Resets the env; (observations, infos) of the agents that act first."""
        if self.is_aec:
            self.env.reset(seed=seed)
            agent = self.env.agent_selection
            return {agent: self.env.observe(agent)}, {agent: dict(self.env.infos.get(agent, {}))}
        observations, infos = self.env.reset(seed=seed)
        self._last_obs = dict(observations)
        return dict(observations), {a: dict(infos.get(a, {})) for a in observations}

    def agents_to_act(self) -> list[str]:
        if self.is_aec:
            env = self.env
            live = env.agents and not (env.terminations[env.agent_selection] or env.truncations[env.agent_selection])
            return [env.agent_selection] if live else []
        return list(self.env.agents)

    def observe(self, agent: str) -> Any:
        """The agent's current observation (for a final observation when the env runner truncates)."""
        return self.env.observe(agent) if self.is_aec else self._last_obs.get(agent)

    def step(self, actions: dict[str, Any]) -> Transition:
        return self._step_aec(actions) if self.is_aec else self._step_parallel(actions)

    def _step_aec(self, actions: dict[str, Any]) -> Transition:
        env = self.env
        agent = env.agent_selection
        if set(actions) != {agent}:
            raise ValueError(f"AEC env expects an action of {agent!r} only, got {sorted(actions)}")
        env.step(actions[agent])
        rewards = {a: float(r) for a, r in env.rewards.items()}
        infos = {a: dict(info) for a, info in env.infos.items()}
        out = Transition(observations={}, rewards=rewards, infos=infos)
        # Agents done now get their final observation, then the dead step PettingZoo asks for.
        while env.agents and (env.terminations[env.agent_selection] or env.truncations[env.agent_selection]):
            done = env.agent_selection
            out.observations[done] = env.observe(done)
            flags = out.terminateds if env.terminations[done] else out.truncateds
            flags[done] = True
            env.step(None)
        if env.agents:
            out.observations[env.agent_selection] = env.observe(env.agent_selection)
        else:
            out.terminateds[ALL] = bool(out.terminateds) and not out.truncateds
            out.truncateds[ALL] = bool(out.truncateds)
        return out

    def _step_parallel(self, actions: dict[str, Any]) -> Transition:
        observations, rewards, terminations, truncations, infos = self.env.step(actions)
        self._last_obs.update(observations)
        out = Transition(
            observations=dict(observations),
            rewards={a: float(r) for a, r in rewards.items()},
            terminateds={a: True for a, t in terminations.items() if t},
            truncateds={a: True for a, t in truncations.items() if t and not terminations.get(a)},
            infos={a: dict(i) for a, i in infos.items()},
        )
        if not self.env.agents:
            out.terminateds[ALL] = not out.truncateds
            out.truncateds[ALL] = bool(out.truncateds)
        return out

    def close(self) -> None:
        self.env.close()


# --- names --------------------------------------------------------------------------------------------

#: Alias -> PettingZoo env class or factory.
_ENVS = Registry("multi-agent env")


def register_multi_agent_env(alias: str, factory: Callable[..., AECEnv | ParallelEnv]) -> None:
    """Registers a PettingZoo env class or factory (called with ``env_config`` as kwargs) under ``alias``."""
    _ENVS.register(alias, factory)


def registered_multi_agent_envs() -> list[str]:
    """The aliases of :func:`register_multi_agent_env`, sorted."""
    return sorted(_ENVS)


def multi_agent_env_name_errors(env: Any, single_agent_envs: list[str] = ()) -> list[str]:
    """A multi-agent env name that is not registered: one line, found before Ray starts."""
    if not isinstance(env, str) or env in _ENVS:
        return []
    if env in single_agent_envs:
        return [f"env: {env!r} is a single-agent env: train it with GiGPOConfig, GRPOConfig, PPOConfig, ..."]
    elsewhere = f"; single-agent: {', '.join(single_agent_envs)}" if single_agent_envs else ""
    return [unknown_name_error("multi-agent env", env, sorted(_ENVS), elsewhere + "; or pass a PettingZoo env class")]


def make_multi_agent_env(
    env: str | Callable[..., Any], env_config: dict[str, Any] | None = None
) -> AECEnv | ParallelEnv:
    """A PettingZoo env from an alias, a class or a factory, with ``env_config`` as keyword arguments."""
    factory = env if callable(env) else _ENVS.get(env)
    if factory is None:
        raise ValueError(
            f"Unknown multi-agent env {env!r}; registered: {sorted(_ENVS)}, or pass a PettingZoo env class."
        )
    return factory(**dict(env_config or {}))


def _register_builtins() -> None:
    from rllib_llm.envs.multi_agent import Points24SolverVerifierEnv, TicTacToeEnv

    register_multi_agent_env("TicTacToe", TicTacToeEnv)
    register_multi_agent_env("Points24SolverVerifier", Points24SolverVerifierEnv)


_register_builtins()

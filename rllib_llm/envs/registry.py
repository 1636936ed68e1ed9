"""Names for environments, so configs and tuned examples can say ``env="NumberLine"``.

Registration goes through gymnasium's registry (ids like ``rllib_llm/NumberLine-v0``) plus a short alias
table, so ``gymnasium.make`` works too and users can register their own envs either way.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable
from typing import Any

import gymnasium as gym

from rllib_llm.registry import Registry
from rllib_llm.registry import unknown_name_error as _unknown

#: Alias -> gymnasium id.
_ALIASES = Registry("env")


def register_env(alias: str, entry_point: str | Callable[..., gym.Env], gym_id: str | None = None) -> str:
    """Registers ``entry_point`` under ``alias`` and a gymnasium id; returns the gymnasium id."""
    gym_id = gym_id or f"rllib_llm/{alias}-v0"
    if gym_id not in gym.registry:
        gym.register(id=gym_id, entry_point=entry_point, disable_env_checker=True)
    _ALIASES.register(alias, gym_id)
    return gym_id


def registered_envs() -> dict[str, str]:
    """Alias -> gymnasium id for every env registered through :func:`register_env`."""
    _load_builtin_envs()
    return dict(_ALIASES)


def make_env(env: str | Callable[..., gym.Env] | type, env_config: dict[str, Any] | None = None) -> gym.Env:
    """Builds an env from an alias, a gymnasium id, a class or a factory, passing ``env_config`` as kwargs."""
    env_config = dict(env_config or {})
    if callable(env):
        return env(**env_config)
    _load_builtin_envs()
    gym_id = _ALIASES.get(env, env)
    if gym_id not in gym.registry:
        known = ", ".join(sorted(_ALIASES)) or "none"
        raise ValueError(f"Unknown env {env!r}. Registered rllib-llm envs: {known}; or pass a gymnasium id or class.")
    return gym.make(gym_id, **env_config).unwrapped


def unknown_name_error(kind: str, name: str, known: list[str], elsewhere: str = "") -> str:
    """One line for a name that is not registered, as a config error of the ``env`` field."""
    return f"env: {_unknown(kind, name, known, elsewhere)}"


def env_name_errors(env: Any, multi_agent_envs: list[str] = ()) -> list[str]:
    """A single-agent env given by a name that is neither an rllib-llm alias nor a gymnasium id, found by
    ``config.validate()`` before Ray starts rather than by the first EnvRunner. ``multi_agent_envs``: the
    multi-agent names, so a multi-agent env given to a single-agent config is told where it belongs."""
    if not isinstance(env, str):
        return []
    _load_builtin_envs()
    if env in _ALIASES or env in gym.registry:
        return []
    if env in multi_agent_envs:
        return [f"env: {env!r} is a multi-agent env: train it with MultiAgentGRPOConfig or MultiAgentGiGPOConfig "
                "(rllib_llm.multi_agent)"]
    elsewhere = f"; multi-agent (MultiAgent*Config): {', '.join(multi_agent_envs)}" if multi_agent_envs else ""
    return [unknown_name_error("env", env, sorted(_ALIASES), elsewhere + "; or pass a gymnasium id or an env class")]


def env_config_errors(env: Any, env_config: dict[str, Any] | None) -> list[str]:
    """What is wrong with ``env_config`` for ``env`` (an alias, a gymnasium id, a class or a factory), checked
    against the constructor's keyword arguments before any env is built: an unknown key (a typo, a field of
    another env) is one line naming the allowed keys, not a traceback from inside an EnvRunner. Envs taking
    ``**kwargs``, and ids this registry cannot resolve, are not checked."""
    creator = env
    if not callable(env):
        _load_builtin_envs()
        spec = gym.registry.get(_ALIASES.get(env, env))
        if spec is None:
            return []
        creator = spec.entry_point
        if isinstance(creator, str):
            try:
                from gymnasium.envs.registration import load_env_creator

                creator = load_env_creator(creator)
            except Exception:  # noqa: BLE001  building the env will report it
                return []
    try:
        parameters = inspect.signature(creator).parameters.values()
    except (TypeError, ValueError):
        return []
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return []
    allowed = sorted(p.name for p in parameters if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD))
    errors = []
    for key in dict(env_config or {}):
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            errors.append(f"env_config: unknown key {key!r} for {getattr(env, '__name__', env)}{hint}; "
                          f"allowed: {', '.join(allowed) or 'none'}")
    return errors


def _load_builtin_envs() -> None:
    import rllib_llm.envs  # noqa: F401  (registers the built-in envs on import)

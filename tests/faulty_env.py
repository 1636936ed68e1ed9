"""Envs for fault-injection tests: a wrapper that makes a seeded share of any env's calls raise or hang,
and an env whose every episode ends won (so a faulted episode counted as a success cannot hide)."""

from __future__ import annotations

import random
import time
from typing import Any

from rllib_llm.envs.base import TextEnv
from rllib_llm.envs.registry import make_env, register_env

#: One decision stream per seed, shared by every FaultyEnv instance: the env runner replaces a failed env
#: with a fresh one, which must continue the stream rather than restart it.
_STREAMS: dict[int, random.Random] = {}
#: ``(call, kind)`` of every injected fault, for the tests to check the runner's count against.
FAULTS: list[tuple[str, str]] = []


class WinsAfterEnv(TextEnv):
    """Every episode ends after ``length`` steps with ``won=True``; ``+``/``-`` are the valid actions."""

    def __init__(self, length: int = 3) -> None:
        super().__init__()
        self.length, self.t = length, 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        super().reset(seed=seed)
        self.t = 0
        return "step 0", {"anchor_obs": 0, "available_actions": ["+", "-"]}

    def step(self, action: str | None) -> tuple[str, float, bool, bool, dict]:
        self.t += 1
        done = self.t >= self.length
        info = {"is_action_valid": action in ("+", "-"), "won": done, "anchor_obs": self.t}
        return f"step {self.t}", float(done), done, False, info


class FaultyEnv(TextEnv):
    """Wraps ``make_env(inner, inner_config)``; each step fails with probability ``fault_rate`` (each reset
    with ``reset_fault_rate``): every ``hang_every``-th failure sleeps ``hang_s`` seconds (past the runner's
    ``env_step_timeout_s``), the others raise."""

    def __init__(
        self,
        inner: str = "NumberLine",
        inner_config: dict[str, Any] | None = None,
        fault_rate: float = 0.1,
        reset_fault_rate: float = 0.0,
        hang_every: int | None = None,
        hang_s: float = 3.0,
        seed: int = 0,
    ) -> None:
        self.env = make_env(inner, inner_config)
        self.prompt_template = self.env.prompt_template
        self.action_format = getattr(self.env, "action_format", "tags")
        self.observation_space, self.action_space = self.env.observation_space, self.env.action_space
        self.rates = {"step": fault_rate, "reset": reset_fault_rate}
        self.hang_every, self.hang_s = hang_every, hang_s
        self.rng = _STREAMS.setdefault(seed, random.Random(seed))

    @property
    def task_description(self) -> str:
        return getattr(self.env, "task_description", "")

    def _maybe_fail(self, call: str) -> None:
        if self.rng.random() >= self.rates[call]:
            return
        kind = "hang" if self.hang_every and (len(FAULTS) + 1) % self.hang_every == 0 else "raise"
        FAULTS.append((call, kind))
        if kind == "hang":
            time.sleep(self.hang_s)
        raise RuntimeError(f"injected {call} fault")

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        self._maybe_fail("reset")
        return self.env.reset(seed=seed, options=options)

    def step(self, action: str | None) -> tuple[Any, float, bool, bool, dict]:
        self._maybe_fail("step")
        return self.env.step(action)


register_env("WinsAfter", WinsAfterEnv)
register_env("Faulty", FaultyEnv)

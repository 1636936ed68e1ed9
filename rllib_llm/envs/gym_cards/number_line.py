"""NumberLine (Gym Cards): move a pointer along 0..max_position until it sits on the target.

As in RL4VLM's gym_cards NumberLine (the env verl-agent trains on): actions ``+`` and ``-`` move the pointer by
one, reward 1 when it reaches the target (episode ends), ``away_penalty`` (default -1, RL4VLM's reward) for a
step that does not bring the pointer closer (away from the target, into the end of the line, or an unparseable
action, which leaves the pointer where it is), 0 for a step that does; the episode is truncated after
``max_steps``. ``away_penalty=0`` rewards success only.

Why RL4VLM's per-step penalty is the default (notes/learning.md): with success alone, a start state whose
right move the policy rarely takes yields groups whose episodes all fail, so no advantage there, while the
states where the policy's favourite move is right keep rewarding it: the policy drifts to one constant move.
The per-step penalty scores every move in every state. An unparseable action also costs the runner's
``invalid_action_penalty``; were it exempt from ``away_penalty``, not answering would be cheaper than a wrong
move, and RL learns exactly that (measured: valid-action rate -> 0). ``invalid_reward`` replaces the env's
reward of an unparseable step (verl-agent's: ``invalid_reward=0.0``, its only penalty the runner's).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from rllib_llm.envs.base import TextEnv


class NumberLineEnv(TextEnv):
    prompt_template: ClassVar[str] = (
        "Move the pointer (0-{max_position}) to the target: '+' adds 1, '-' subtracts 1.\n{memory}"
        "{current_observation}\nReply <action>+</action> or <action>-</action>."
    )
    #: One in-context example (observation, response): small instruct models rarely produce the action
    #: format zero-shot, and RL cannot learn from a format it never samples.
    few_shot: ClassVar[list[tuple[str, str]]] = [("Target 1, position 3.", "<action>-</action>")]
    ACTIONS: ClassVar[tuple[str, ...]] = ("+", "-")

    def __init__(
        self, max_position: int = 5, max_steps: int = 6, away_penalty: float = -1.0, invalid_reward: float | None = None
    ) -> None:
        super().__init__()
        if max_position < 1:
            raise ValueError(f"NumberLine max_position must be >= 1, got {max_position}")
        if max_steps < 1:
            raise ValueError(f"NumberLine max_steps must be >= 1, got {max_steps}")
        if not isinstance(away_penalty, (int, float)) or away_penalty > 0:
            raise ValueError(f"NumberLine away_penalty must be a number <= 0, got {away_penalty!r}")
        self.max_position = max_position
        self.max_steps = max_steps
        self.away_penalty = float(away_penalty)
        self.invalid_reward = None if invalid_reward is None else float(invalid_reward)
        self.target = 0
        self.position = 0
        self.steps = 0

    def _obs(self) -> str:
        return f"Target {self.target}, position {self.position}."

    def _info(self, valid: bool) -> dict[str, Any]:
        return {
            "is_action_valid": valid,
            "won": self.position == self.target,
            "anchor_obs": (self.target, self.position),
            "available_actions": list(self.ACTIONS),
            "prompt_slots": {"max_position": self.max_position},
        }

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        super().reset(seed=seed)
        self.target, self.position = (int(v) for v in self.np_random.choice(self.max_position + 1, 2, replace=False))
        self.steps = 0
        self.task_description = f"Move the pointer to {self.target}."
        return self._obs(), self._info(True)

    def step(self, action: str | None) -> tuple[str, float, bool, bool, dict]:
        self.steps += 1
        move = (action or "").strip()
        valid = move in self.ACTIONS
        distance = abs(self.target - self.position)
        if valid:
            self.position = int(np.clip(self.position + (1 if move == "+" else -1), 0, self.max_position))
        won = self.position == self.target
        closer = abs(self.target - self.position) < distance
        reward = 1.0 if won else (self.away_penalty if not closer else 0.0)
        if not valid and self.invalid_reward is not None:
            reward = self.invalid_reward
        truncated = not won and self.steps >= self.max_steps
        return self._obs(), reward, won, truncated, self._info(valid)

    def render(self) -> str:
        line = ["."] * (self.max_position + 1)
        line[self.target] = "T"
        line[self.position] = "P" if self.position != self.target else "*"
        return "".join(line)

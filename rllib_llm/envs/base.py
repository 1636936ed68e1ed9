"""The contract every rllib-llm environment follows.

An LLM env is a plain ``gymnasium.Env`` whose observations are text (optionally with an image) and whose
actions are the strings the policy wrote between ``<action>`` and ``</action>``. The env runner parses the
tags; the env receives the inner text, or ``None`` when the response had no parseable action.

What the env runner and the algorithms read from an env:

- ``reset(seed=s)`` must be deterministic in ``s``: a group of envs reset with one seed starts in one state.
- ``info["is_action_valid"]`` (bool) on every ``step``: False for ``None`` or inadmissible actions, which
  the env treats as a no-op. The env runner applies the configured invalid-action penalty, so envs do not
  subtract it themselves.
- ``info["won"]`` (bool): success, read for the success-rate metric.
- ``info["anchor_obs"]`` (hashable, optional): the state key GiGPO groups steps by; the text observation
  when absent.
- ``info["available_actions"]`` (list[str], optional): admissible actions, shown in the prompt.
- ``prompt_template`` (class attribute): a ``str.format`` template for the prompt, using the slots of
  :mod:`rllib_llm.env_connectors.templates` (or the name of a template registered there).
- ``task_description`` (attribute, set by ``reset``): the instruction for this episode, if any.
- ``action_format`` (class attribute): ``"tags"`` (default: the env gets the text inside ``<action>``) or ``"raw"``
  (the env runner passes the whole response text, e.g. for tool-calling envs that parse ``<search>``/``<answer>``).
- Seeds from :data:`HELD_OUT_SEED_OFFSET` on are held out (the config's ``evaluation_seed_offset``): an env that
  draws its tasks from a finite pool (Search's questions, ALFWorld's local games) keeps part of the pool for
  them (:class:`HeldOutSplit`), so held-out evaluation measures tasks that training never saw, not recall.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

#: The first held-out seed: training draws seeds below it, evaluation plays seeds from it on (the default of
#: ``LLMConfig.evaluation_seed_offset``).
HELD_OUT_SEED_OFFSET = 10_000_000


class HeldOutSplit:
    """A finite pool of tasks split once into a training part and a held-out part.

    A task is held out by the rank of ``sha256(key)`` (the ``round(fraction * n)`` lowest, at least one when
    ``fraction > 0``): the split does not depend on the pool's order. A training seed (below ``from_seed``)
    draws a training task at random; held-out seed ``from_seed + k`` plays the k-th held-out task (cycling), so
    ``n`` consecutive held-out seeds are ``n`` different tasks while ``n`` <= the held-out part. With
    ``fraction=0`` every seed draws from the whole pool (no held-out tasks).
    """

    def __init__(self, keys: Sequence[str], fraction: float, from_seed: int = HELD_OUT_SEED_OFFSET) -> None:
        if not 0.0 <= fraction < 1.0:
            raise ValueError(f"held_out_fraction must be in [0, 1), got {fraction!r}")
        n = len(keys)
        count = min(n - 1, max(1, round(fraction * n))) if fraction > 0 and n > 1 else 0
        ranked = sorted(range(n), key=lambda i: hashlib.sha256(str(keys[i]).encode()).hexdigest())
        held = set(ranked[:count])
        self.held_out = [i for i in range(n) if i in held]
        self.training = [i for i in range(n) if i not in held]
        self.from_seed = from_seed

    def index(self, seed: int | None, rng: np.random.Generator) -> int:
        """The pool index that ``seed`` plays (``rng``: the env's ``np_random``, already seeded with it)."""
        if seed is not None and seed >= self.from_seed and self.held_out:
            return self.held_out[(seed - self.from_seed) % len(self.held_out)]
        return self.training[int(rng.integers(len(self.training)))]


class TextEnv(gym.Env):
    """Base class for text environments: text observation space, free-form text action space."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"]}
    prompt_template: ClassVar[str] = (
        "{task_description}\n{memory}\nCurrent observation:\n{current_observation}\nAvailable actions: [{available_actions}]\n"
        "Think briefly, then give your action inside <action> </action> tags."
    )

    #: How the env runner extracts the action from a response: "tags" (inside <action></action>) or "raw".
    action_format: ClassVar[str] = "tags"

    #: Max characters of a text observation or action (for the gymnasium Text spaces).
    max_text_length: ClassVar[int] = 8192

    def __init__(self) -> None:
        super().__init__()
        charset = "".join(chr(i) for i in range(32, 127)) + "\n\t"
        self.observation_space = gym.spaces.Text(max_length=self.max_text_length, charset=charset)
        self.action_space = gym.spaces.Text(max_length=self.max_text_length, charset=charset)
        self.task_description: str = ""

    @staticmethod
    def invalid_info(**extra: Any) -> dict[str, Any]:
        """The info dict of a step whose action was not admissible."""
        return {"is_action_valid": False, "won": False, **extra}

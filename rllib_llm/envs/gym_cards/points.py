"""EZPoints and 24 Points (Gym Cards, after RL4VLM): write one formula over the dealt cards that hits a target.

The whole formula is the action, so a correct answer ends the episode in one step. A formula that is
malformed, uses other numbers than the cards, or uses a forbidden operator is invalid (a no-op with
``is_action_valid=False``); a well-formed formula with the wrong value is valid, earns 0 and the player may
try again. Either way the episode is truncated after ``max_steps``. As in RL4VLM, J/Q/K count as 10 by
default (``face_cards_as_10=False`` makes them 11/12/13) and A is 1. Only solvable hands are dealt, and
formulas are computed exactly.

verl-agent's rules (its gym_cards, after RL4VLM, builds the formula one card or operator per step and scores
it when ``=`` is chosen), each a switch (notes/parity.md): ``retry_wrong_formula=False`` ends the episode on
the first formula written, right, wrong or ill-formed (its ``=`` always ends it); ``solvable_only=False`` deals
any hand (about 30 % of its 24 Points hands have no solution); ``arithmetic="float"`` computes as its Python
``eval`` does (``8/(3-8/3)`` misses 24 by rounding).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from rllib_llm.envs import rendering
from rllib_llm.envs.base import TextEnv
from rllib_llm.envs.gym_cards import cards as cardlib
from rllib_llm.envs.gym_cards.formula import (
    ARITHMETIC,
    FormulaError,
    card_overlap,
    evaluate_formula,
    find_solution,
)


class CardFormulaEnv(TextEnv):
    """Shared logic of the formula games; subclasses fix the number of cards, the target and the operators."""

    NUM_CARDS: ClassVar[int] = 2
    TARGET: ClassVar[int] = 12
    OPS: ClassVar[str] = "+*"
    GAME: ClassVar[str] = ""
    EXAMPLE: ClassVar[str] = ""
    prompt_template: ClassVar[str] = (
        "You are playing {game}. You are given cards and must write one formula that uses each card's number "
        "exactly once, with only the operators {operators} and parentheses, so that it equals {target}. "
        "{face_rule}\n{memory}Current observation: {current_observation}\n"
        "Think briefly, then write the formula inside <action> </action> tags, e.g. <action>{example}</action>."
    )

    def __init__(
        self,
        max_steps: int = 3,
        face_cards_as_10: bool = True,
        success_reward: float = 1.0,
        image_obs: bool = False,
        retry_wrong_formula: bool = True,
        solvable_only: bool = True,
        arithmetic: str = "exact",
    ) -> None:
        super().__init__()
        if arithmetic not in ARITHMETIC:
            raise ValueError(f"arithmetic must be one of {sorted(ARITHMETIC)}, got {arithmetic!r}")
        self.max_steps = max_steps
        self.retry_wrong_formula = retry_wrong_formula
        self.solvable_only = solvable_only
        self.arithmetic = arithmetic
        self.face_cards_as_10 = face_cards_as_10
        self.success_reward = success_reward
        self.image_obs = image_obs
        width = self.NUM_CARDS * (cardlib.CARD_W + cardlib.GAP) + cardlib.GAP
        self._image_shape = (cardlib.CARD_H + 2 * cardlib.GAP, width)
        if image_obs:
            self.observation_space = rendering.image_observation_space(self.observation_space, *self._image_shape)
        self.cards: list[cardlib.Card] = []
        self.steps = 0
        self.feedback = ""
        self.solved = False
        #: How close the last formula's numbers were to the cards (:func:`card_overlap`; 0 for no formula).
        self.card_overlap = 0.0
        self.well_formed = True

    def card_value(self, card: cardlib.Card) -> int:
        if card.rank == "A":
            return 1
        if card.rank in ("J", "Q", "K"):
            return 10 if self.face_cards_as_10 else {"J": 11, "Q": 12, "K": 13}[card.rank]
        return int(card.rank)

    @property
    def values(self) -> list[int]:
        return [self.card_value(c) for c in self.cards]

    def solution(self) -> str | None:
        """A correct formula for the current hand (for tests and demonstrations)."""
        return find_solution(self.values, self.TARGET, self.OPS)

    def _face_values(self) -> dict[str, int]:
        return {r: self.card_value(cardlib.Card(r)) for r in ("A", "J", "Q", "K")}

    def _obs(self) -> Any:
        text = f"Cards: {cardlib.cards_text(self.cards)}."
        if self.feedback:
            text += f"\n{self.feedback}"
        image = None
        if self.image_obs:
            image = cardlib.pad_to(cardlib.render_rows([list(self.cards)]), *self._image_shape)
        return rendering.with_image(text, image)

    def _info(self, valid: bool) -> dict[str, Any]:
        face = "J, Q and K count as 10" if self.face_cards_as_10 else "J, Q and K count as 11, 12 and 13"
        return {
            "is_action_valid": valid,
            "won": self.solved,
            "anchor_obs": tuple(self.values),
            "card_overlap": self.card_overlap,
            "well_formed": self.well_formed,
            "prompt_slots": {
                "game": self.GAME,
                "target": self.TARGET,
                "operators": ", ".join(self.OPS),
                "face_rule": f"A counts as 1; {face}.",
                "example": self.EXAMPLE,
            },
        }

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        while True:  # only solvable hands (unless solvable_only=False); almost every deal is for EZPoints, most for 24
            self.cards = cardlib.new_deck(self.np_random)[: self.NUM_CARDS]
            if not self.solvable_only or self.solution() is not None:
                break
        self.steps, self.feedback, self.solved, self.card_overlap, self.well_formed = 0, "", False, 0.0, True
        self.task_description = f"Use the cards {cardlib.cards_text(self.cards)} to make {self.TARGET}."
        return self._obs(), self._info(True)

    def step(self, action: str | None) -> tuple[Any, float, bool, bool, dict]:
        if not self.cards:
            raise RuntimeError("Call reset() before step()")
        self.steps += 1
        reward, valid, self.card_overlap, self.well_formed = 0.0, True, 1.0, True
        try:
            value = evaluate_formula(action, self.values, self.OPS, self._face_values(), self.arithmetic)  # type: ignore[arg-type]
        except FormulaError as e:
            valid, self.feedback = False, f"Invalid formula ({e})."
            # A well-formed formula over other numbers (the card check is its only fault) keeps its numbers.
            self.well_formed = e.numbers is not None
            self.card_overlap = card_overlap(e.numbers, self.values) if e.numbers is not None else 0.0
        else:
            self.solved = value == self.TARGET
            if self.solved:
                reward, self.feedback = self.success_reward, f"Correct: {action.strip()} = {self.TARGET}."  # type: ignore[union-attr]
            else:
                self.feedback = f"Your formula equals {_shown(value)}, not {self.TARGET}. Try again."
        # verl-agent's "=": any formula ends the episode; a reply the parser could not read (None) is no formula.
        terminated = self.solved or (not self.retry_wrong_formula and action is not None)
        truncated = not terminated and self.steps >= self.max_steps
        return self._obs(), reward, terminated, truncated, self._info(valid)

    def render(self) -> str:
        return cardlib.cards_text(self.cards)

    def render_rgb(self) -> np.ndarray:
        return cardlib.pad_to(cardlib.render_rows([list(self.cards)]), *self._image_shape)


def _shown(value: Any) -> str:
    """A formula's value as the feedback shows it: ``7``, ``17/3`` (exact) or ``23.99999999999999`` (float)."""
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    return str(value) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


class EZPointsEnv(CardFormulaEnv):
    """Two cards, + and *, make 12."""

    NUM_CARDS, TARGET, OPS, GAME, EXAMPLE = 2, 12, "+*", "EZPoints", "2*6"


class Points24Env(CardFormulaEnv):
    """Four cards, + - * / with exact fractions, make 24."""

    NUM_CARDS, TARGET, OPS, GAME, EXAMPLE = 4, 24, "+-*/", "24 Points", "(4+8)*(3-1)"

"""24 Points played by a solver and a verifier (cooperative, turn-based, PettingZoo AEC).

The solver sees four cards and proposes a formula; the verifier sees the cards and the proposal and
answers ``accept`` or ``reject: <feedback>``. Accepting ends the game: both agents get ``success_reward``
(and ``won``) if the formula really makes 24, nothing otherwise. A rejection sends the feedback back to
the solver for another round, up to ``max_rounds`` (then the game is truncated, unpaid).

Dealing, formula checking and the exact-fraction arithmetic are the single-agent
:class:`~rllib_llm.envs.gym_cards.points.Points24Env`'s (a safe AST evaluator, never ``eval``), which this
env holds as its game engine. A solver answer that is not a well-formed formula (unparseable, other
operators) is an invalid no-op: the solver tries again, with the parser's message. A well-formed formula
over other numbers than the cards is a valid proposal that cannot win: catching it is the verifier's job
(its prompt says so), and it keeps the verifier acting while a small solver has not learned the cards yet.
A verifier answer that is neither accept nor reject is invalid: the verifier answers again.

``card_match_reward`` (default 0: the game's own rewards only) shapes the solver's reward for small models
that rarely write a formula over the right numbers: each well-formed formula pays the solver
``card_match_reward * card_overlap`` at once (the share of the cards it used correctly; 1 for exactly the
cards), so "closer to the cards" is rewarded before any formula is accepted.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from rllib_llm.envs.gym_cards.cards import cards_text
from rllib_llm.envs.gym_cards.points import Points24Env
from rllib_llm.envs.multi_agent.base import TextAECEnv

SOLVER, VERIFIER = "solver", "verifier"
_DECISION = re.compile(r"\s*(accept|reject)\b[\s:,.;-]*(.*)", re.IGNORECASE | re.DOTALL)


class Points24SolverVerifierEnv(TextAECEnv):
    """See module docstring."""

    metadata: ClassVar[dict[str, Any]] = {
        "render_modes": ["ansi"],
        "name": "points24_solver_verifier_v0",
        "is_parallelizable": False,
    }
    possible_agents: ClassVar[list[str]] = [SOLVER, VERIFIER]
    prompt_templates: ClassVar[dict[str, str]] = {
        SOLVER: (
            "You are the solver in a team playing 24 Points. Write one formula that uses each card's number exactly "
            "once, with only + - * / and parentheses, so that it equals 24. {face_rule} A verifier checks your "
            "formula.\n{memory}Current observation: {current_observation}\nThink briefly, then write the formula "
            "inside <action> </action> tags, e.g. <action>(4+8)*(3-1)</action>."
        ),
        VERIFIER: (
            "You are the verifier in a team playing 24 Points. The solver must use each card's number exactly once, "
            "with only + - * / and parentheses, to make 24. {face_rule} Check the solver's formula step by step."
            "\n{memory}Current observation: {current_observation}\nThink briefly, then answer inside <action> "
            "</action> tags with accept, or with reject and what is wrong, e.g. <action>reject: 4*5 is 20, not "
            "24</action>."
        ),
    }

    def __init__(
        self,
        max_rounds: int = 3,
        face_cards_as_10: bool = True,
        success_reward: float = 1.0,
        max_steps: int | None = None,
        card_match_reward: float = 0.0,
    ) -> None:
        super().__init__(max_steps=max_steps if max_steps is not None else 4 * max_rounds)
        if max_rounds < 1:
            raise ValueError(f"max_rounds must be >= 1, got {max_rounds}")
        self.max_rounds = max_rounds
        self.success_reward = success_reward
        if card_match_reward < 0:
            raise ValueError(f"card_match_reward must be >= 0, got {card_match_reward}")
        self.card_match_reward = card_match_reward
        self.game = Points24Env(max_steps=10**9, face_cards_as_10=face_cards_as_10)
        self.rounds = 0
        self.proposal: str | None = None
        self.proposal_correct = False
        self.solver_feedback = ""
        self.verifier_feedback = ""
        self._slots: dict[str, Any] = {}

    @property
    def cards(self) -> str:
        return cards_text(self.game.cards)

    def _new_game(self, seed: int | None) -> str:
        _, info = self.game.reset(seed=seed)
        self._slots = info["prompt_slots"]
        self.rounds, self.proposal, self.proposal_correct = 0, None, False
        self.solver_feedback = self.verifier_feedback = ""
        self.task_descriptions = {
            SOLVER: f"Use the cards {self.cards} to make 24.",
            VERIFIER: f"Check the solver's formulas for the cards {self.cards}.",
        }
        return SOLVER

    def observe(self, agent: str) -> str:
        if agent == SOLVER:
            text = f"Cards: {self.cards}."
            return text + (f"\n{self.solver_feedback}" if self.solver_feedback else "")
        text = f"Cards: {self.cards}. The solver proposes: {self.proposal if self.proposal is not None else '(nothing yet)'}"
        return text + (f"\n{self.verifier_feedback}" if self.verifier_feedback else "")

    def _agent_info(self, agent: str) -> dict[str, Any]:
        key = self.solver_feedback if agent == SOLVER else self.proposal
        return {
            "anchor_obs": (agent, tuple(self.game.values), key),
            "prompt_slots": self._slots,
            "round": self.rounds + 1,
            "proposal_correct": self.proposal_correct,
        }

    def _play(self, agent: str, action: str | None) -> tuple[bool, str | None]:
        return self._propose(action) if agent == SOLVER else self._judge(action)

    def _propose(self, formula: str | None) -> tuple[bool, str | None]:
        if formula is None or not formula.strip():
            self.solver_feedback = "Your last answer had no formula."
            return False, SOLVER
        _, _, correct, _, info = self.game.step(formula)
        self.rewards[SOLVER] = self.card_match_reward * info["card_overlap"]
        if not info["well_formed"]:
            self.solver_feedback = self.game.feedback  # the parser's "Invalid formula (...)" message
            return False, SOLVER
        # Checking that the formula uses each card once is the verifier's job: a well-formed formula over
        # other numbers is proposed (it cannot be correct), so the verifier acts even for an untrained solver.
        self.proposal, self.proposal_correct = formula.strip(), bool(correct and info["is_action_valid"])
        self.verifier_feedback = ""
        return True, VERIFIER

    def _judge(self, decision: str | None) -> tuple[bool, str | None]:
        match = _DECISION.fullmatch(decision) if decision is not None else None
        if match is None:
            self.verifier_feedback = "Your last answer was neither accept nor reject."
            return False, VERIFIER
        self.verifier_feedback = ""
        if match.group(1).lower() == "accept":
            reward = self.success_reward if self.proposal_correct else 0.0
            self._finish(
                dict.fromkeys(self.agents, reward), winners=tuple(self.agents) if self.proposal_correct else ()
            )
            return True, None
        self.rounds += 1
        reason = match.group(2).strip() or "(no reason given)"
        self.solver_feedback = f"The verifier rejected your formula {self.proposal}: {reason}"
        if self.rounds >= self.max_rounds:
            self._finish({}, truncated=True)
            return True, None
        return True, SOLVER

    def render(self) -> str:
        return self.observe(SOLVER)

"""Tic-tac-toe for two LLM players (competitive, turn-based, PettingZoo AEC).

PettingZoo's ``classic.tictactoe_v3`` needs pygame and speaks Discrete actions with action masks, so this is
a small text version with the same agent names and rewards: ``player_1`` plays X and moves first,
``player_2`` plays O; a win pays +1 to the winner and -1 to the loser, a draw 0. The observation is the
player's mark, the board (free cells show their numbers) and the legal moves; the action is a cell number. An illegal move (a taken cell, a number out
of range, or no number at all) is an invalid no-op: the same player moves again and sees why in its next
observation. ``opening_moves`` random legal moves (deterministic in the reset seed) start the game, so
different seeds give different positions; ``max_steps`` truncates a game stalled by illegal moves.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

import numpy as np

from rllib_llm.envs.multi_agent.base import TextAECEnv

LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))
_CELL = re.compile(r"\s*(?:cell\s*)?(\d+)\s*\.?\s*", re.IGNORECASE)


def winner_mark(board: list[str | None]) -> str | None:
    """'X' or 'O' if that mark fills a line, else None."""
    for a, b, c in LINES:
        if board[a] is not None and board[a] == board[b] == board[c]:
            return board[a]
    return None


def render_board(board: list[str | None]) -> str:
    """Three rows like `` X | 2 | O``: marks, or the number of a free cell."""
    cells = [mark or str(i + 1) for i, mark in enumerate(board)]
    rows = [" " + " | ".join(cells[r : r + 3]) for r in (0, 3, 6)]
    return "\n---+---+---\n".join(rows)


class TicTacToeEnv(TextAECEnv):
    """See module docstring."""

    metadata: ClassVar[dict[str, Any]] = {
        "render_modes": ["ansi"],
        "name": "tictactoe_text_v0",
        "is_parallelizable": False,
    }
    possible_agents: ClassVar[list[str]] = ["player_1", "player_2"]
    MARKS: ClassVar[dict[str, str]] = {"player_1": "X", "player_2": "O"}
    prompt_template: ClassVar[str] = (
        "You are playing tic-tac-toe as {mark}; your opponent plays {opponent_mark}. Three of your marks in a "
        "row, column or diagonal win; numbers on the board are free cells.\n{memory}Current observation:\n"
        "{current_observation}\nThink briefly, then give the number of the cell you take inside <action> </action> "
        "tags, e.g. <action>5</action>."
    )

    def __init__(
        self,
        opening_moves: int = 0,
        max_steps: int = 30,
        win_reward: float = 1.0,
        lose_reward: float = -1.0,
        draw_reward: float = 0.0,
    ) -> None:
        super().__init__(max_steps=max_steps)
        if not 0 <= opening_moves <= 4:
            raise ValueError(f"opening_moves must be in [0, 4] (no game is decided before move 5), got {opening_moves}")
        self.opening_moves = opening_moves
        self.win_reward, self.lose_reward, self.draw_reward = win_reward, lose_reward, draw_reward
        self.board: list[str | None] = [None] * 9
        self.feedback: dict[str, str] = {}

    def legal_moves(self) -> list[int]:
        return [i + 1 for i, mark in enumerate(self.board) if mark is None]

    def _other(self, agent: str) -> str:
        return self.possible_agents[1 - self.possible_agents.index(agent)]

    def _new_game(self, seed: int | None) -> str:
        rng = np.random.default_rng(seed)
        self.board = [None] * 9
        self.feedback = {}
        agent = self.possible_agents[0]
        for _ in range(self.opening_moves):
            self.board[int(rng.choice(self.legal_moves())) - 1] = self.MARKS[agent]
            agent = self._other(agent)
        self.task_descriptions = {a: f"You play {self.MARKS[a]}." for a in self.possible_agents}
        return agent

    def observe(self, agent: str) -> str:
        """Self-contained (so memories and few-shot examples read alone): mark, board, legal moves, feedback."""
        moves = ", ".join(map(str, self.legal_moves())) or "none"
        text = f"You are {self.MARKS[agent]}.\n{render_board(self.board)}\nLegal moves: {moves}."
        if self.feedback.get(agent):
            text += f"\n{self.feedback[agent]}"
        return text

    def _agent_info(self, agent: str) -> dict[str, Any]:
        mark = self.MARKS[agent]
        return {
            "anchor_obs": ("".join(m or "." for m in self.board), mark),
            "available_actions": [str(m) for m in self.legal_moves()],
            "prompt_slots": {"mark": mark, "opponent_mark": self.MARKS[self._other(agent)]},
        }

    def _play(self, agent: str, action: str | None) -> tuple[bool, str | None]:
        match = _CELL.fullmatch(action) if action is not None else None
        cell = int(match.group(1)) if match else None
        if cell is None or cell not in self.legal_moves():
            self.feedback[agent] = (
                "Your last answer was not a cell number."
                if cell is None
                else f"Your last move {cell} was illegal: pick a free cell from the legal moves."
            )
            return False, agent
        self.feedback[agent] = ""
        self.board[cell - 1] = self.MARKS[agent]
        other = self._other(agent)
        if winner_mark(self.board) is not None:
            self._finish({agent: self.win_reward, other: self.lose_reward}, winners=(agent,))
            return True, None
        if not self.legal_moves():
            self._finish({agent: self.draw_reward, other: self.draw_reward})
            return True, None
        return True, other

    def render(self) -> str:
        return render_board(self.board)

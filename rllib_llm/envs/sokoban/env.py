"""Sokoban: push every box onto a target. Text grid observation, optional RGB image for vision models.

With ``image_obs=True`` the observation is ``{"text", "image"}``; adding ``text_obs=False`` replaces the text grid
by :data:`IMAGE_ONLY_TEXT`, so a vision-language policy sees the board in the image only (verl-agent's visual
Sokoban; memories then hold no past grids either).

Rewards follow gym-sokoban: -0.1 per step, +1 for pushing a box onto a target, -1 for pushing one off,
+10 once all boxes are on targets (the episode then terminates). Walking into a wall is a valid action that
changes nothing; an unparseable action is a no-op with ``is_action_valid=False`` (the step still costs -0.1
because time passed; the env runner adds its own invalid-action penalty). ``action_matching="substring"``
reads actions as verl-agent does (notes/parity.md). ``zero_boxes_on_target_at_reset=True`` keeps gym-sokoban's
reset quirk that verl-agent inherits (its count of boxes on targets starts at 0, so the first step of a level
with a box already on a target earns +1 that no push earned).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from rllib_llm.envs import rendering
from rllib_llm.envs.base import TextEnv
from rllib_llm.envs.sokoban.level import LEGEND, MOVES, Level, generate_level

# Tile colours for the image rendering.
_WALL_C, _FLOOR_C, _TARGET_C = (110, 60, 40), (210, 200, 180), (200, 40, 40)
_BOX_C, _BOX_DONE_C, _PLAYER_C = (180, 120, 40), (60, 170, 70), (40, 80, 200)
#: The observation text with ``text_obs=False``.
IMAGE_ONLY_TEXT = "(the board is in the image)"
#: What the image's colours mean, for prompts of image-only policies.
IMAGE_LEGEND = (
    "brown = wall, beige = floor, red outline = target, orange square = box, green square = box on a target, "
    "blue disk = you"
)


#: How an action text is read: "exact" (one of up/down/left/right, case and spaces ignored) or "substring"
#: (verl-agent's ``sokoban_projection``: the first of up, down, left, right, still that the text contains, so
#: "move up" is up and "still" is a valid move that changes nothing).
ACTION_MATCHING = ("exact", "substring")
#: verl-agent's valid no-op action.
STILL = "still"


def substring_move(text: str) -> str:
    """verl-agent's reading of an action text: the first of up, down, left, right, still (in that order)
    contained in ``text``, else ``text`` unchanged (invalid)."""
    return next((move for move in (*MOVES, STILL) if move in text), text)


class SokobanEnv(TextEnv):
    prompt_template: ClassVar[str] = (
        "You are solving Sokoban. Push every box onto a target. You can push a box (not pull it) by walking "
        "into it, and you cannot push two boxes at once or push a box into a wall.\n"
        "Symbols: {legend}.\n{memory}Current observation (step {current_step}):\n{current_observation}\n"
        "Available actions: {available_actions}\n"
        "Think briefly, then give exactly one action inside <action> </action> tags, e.g. <action>up</action>."
    )
    STEP_PENALTY: ClassVar[float] = -0.1
    BOX_ON_REWARD: ClassVar[float] = 1.0
    BOX_OFF_PENALTY: ClassVar[float] = -1.0
    FINISH_REWARD: ClassVar[float] = 10.0

    def __init__(
        self,
        dim_room: tuple[int, int] = (6, 6),
        num_boxes: int = 1,
        max_steps: int = 100,
        min_solution_length: int = 4,
        image_obs: bool = False,
        tile_size: int = 16,
        text_obs: bool = True,
        action_matching: str = "exact",
        zero_boxes_on_target_at_reset: bool = False,
    ) -> None:
        super().__init__()
        self.zero_boxes_on_target_at_reset = zero_boxes_on_target_at_reset
        #: Boxes on targets as last scored: a step's box reward is the change from this count.
        self.scored_boxes_on_target = 0
        if action_matching not in ACTION_MATCHING:
            raise ValueError(f"action_matching must be one of {ACTION_MATCHING}, got {action_matching!r}")
        self.action_matching = action_matching
        if not (text_obs or image_obs):
            raise ValueError("Sokoban with text_obs=False needs image_obs=True (the board must be shown somehow)")
        if num_boxes < 1:
            raise ValueError(f"Sokoban needs at least one box, got {num_boxes}")
        if min(dim_room) < 4:
            raise ValueError(f"Sokoban rooms must be at least 4x4, got {dim_room}")
        self.dim_room = (int(dim_room[0]), int(dim_room[1]))
        self.num_boxes = num_boxes
        self.max_steps = max_steps
        self.min_solution_length = min_solution_length
        self.image_obs = image_obs
        self.text_obs = text_obs
        self.tile_size = tile_size
        if image_obs:
            h, w = self.dim_room
            self.observation_space = rendering.image_observation_space(
                self.observation_space, h * tile_size, w * tile_size
            )
        self.level: Level | None = None
        self.solution: list[str] = []
        self.steps = 0

    # -- observations -------------------------------------------------------------------------------------
    def _text(self) -> str:
        assert self.level is not None
        return self.level.to_text()

    def render_rgb(self) -> np.ndarray:
        """The board as an RGB array (uint8, H*tile x W*tile x 3)."""
        assert self.level is not None
        t = self.tile_size
        h, w = self.dim_room  # fixed size (the observation space); cells outside a smaller level are walls
        img = rendering.canvas(h * t, w * t, _WALL_C)
        m = max(1, t // 8)
        for r in range(h):
            for c in range(w):
                p, top, left = (r, c), r * t, c * t
                if p not in self.level.floor:
                    rendering.draw_border(img, top, left, t, t, (80, 40, 25))
                    continue
                rendering.fill_rect(img, top, left, t, t, _FLOOR_C)
                if p in self.level.targets:
                    rendering.draw_border(img, top + m, left + m, t - 2 * m, t - 2 * m, _TARGET_C, thickness=m)
                if p in self.level.boxes:
                    color = _BOX_DONE_C if p in self.level.targets else _BOX_C
                    rendering.fill_rect(img, top + m, left + m, t - 2 * m, t - 2 * m, color)
                    rendering.draw_border(img, top + m, left + m, t - 2 * m, t - 2 * m, (70, 45, 20), thickness=m)
                if p == self.level.player:
                    yy, xx = np.mgrid[0:t, 0:t]
                    disk = (yy - (t - 1) / 2) ** 2 + (xx - (t - 1) / 2) ** 2 <= (t * 0.35) ** 2
                    img[top : top + t, left : left + t][disk] = _PLAYER_C
        return img

    def _obs(self) -> Any:
        text = self._text() if self.text_obs else IMAGE_ONLY_TEXT
        return rendering.with_image(text, self.render_rgb() if self.image_obs else None)

    def _info(self, valid: bool) -> dict[str, Any]:
        assert self.level is not None
        return {
            "is_action_valid": valid,
            "won": self.level.solved,
            "anchor_obs": (self.level.player, tuple(sorted(self.level.boxes))),
            "available_actions": list(MOVES),
            "prompt_slots": {"legend": LEGEND if self.text_obs else IMAGE_LEGEND},
            "boxes_on_target": self.level.boxes_on_target,
        }

    # -- gymnasium API ------------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        """New level from the seed; ``options={"level": text}`` plays a fixed level (in :meth:`Level.to_text` form)."""
        super().reset(seed=seed)
        if options and options.get("level"):
            self.level = Level.from_text(options["level"])
            if self.level.shape[0] > self.dim_room[0] or self.level.shape[1] > self.dim_room[1]:
                raise ValueError(f"Level of shape {self.level.shape} does not fit dim_room={self.dim_room}")
            self.solution = []
        else:
            self.level, self.solution = generate_level(
                self.np_random, self.dim_room, self.num_boxes, self.min_solution_length
            )
        self.steps = 0
        self.scored_boxes_on_target = 0 if self.zero_boxes_on_target_at_reset else self.level.boxes_on_target
        self.task_description = "Push all boxes onto the targets."
        return self._obs(), self._info(True)

    def step(self, action: str | None) -> tuple[Any, float, bool, bool, dict]:
        if self.level is None:
            raise RuntimeError("Call reset() before step()")
        self.steps += 1
        move = action.strip().lower() if isinstance(action, str) else ""
        if self.action_matching == "substring":
            move = substring_move(move)
        valid = move in MOVES or (move == STILL and self.action_matching == "substring")
        reward = self.STEP_PENALTY
        if move in MOVES:
            self.level = self.level.move(move)
        # gym-sokoban's _calc_reward: +1 (or -1) once when the count of boxes on targets rose (fell) since the
        # last step; one push moves one box, so only the reset quirk's first step can differ by more than one.
        before, after = self.scored_boxes_on_target, self.level.boxes_on_target
        if after > before:
            reward += self.BOX_ON_REWARD
        elif after < before:
            reward += self.BOX_OFF_PENALTY
        self.scored_boxes_on_target = after
        if move in MOVES and self.level.solved:
            reward += self.FINISH_REWARD
        terminated = self.level.solved
        truncated = not terminated and self.steps >= self.max_steps
        return self._obs(), reward, terminated, truncated, self._info(valid)

    def render(self) -> str:
        return self._text()

"""ALFWorld (text): household tasks in TextWorld, e.g. "put a clean mug in the coffee machine".

Two modes, one env:

- ``mode="alfworld"``: the real ALFWorld games through the ``alfworld`` package's TextWorld engine (its
  ``AlfredDemangler``/``AlfredInfos`` wrappers, as ``AlfredTWEnv`` uses). Setup: ``pip install alfworld``, then
  ``alfworld-download`` (add ``-f`` to overwrite) fetches the PDDL and game files into ``~/.cache/alfworld``
  (or ``$ALFWORLD_DATA``). Games are collected like ``AlfredTWEnv.collect_game_files``: every
  ``traj_data.json`` with a solvable ``game.tw-pddl`` of the selected task types, skipping movable/sliced trajs;
  ``split`` is "train", "valid_seen" (eval in-distribution) or "valid_unseen" (out-of-distribution).
- ``mode="local"`` (default): TextWorld games generated here with TextWorld's generator (seeded; ``num_games``
  games, cached under ``~/.cache/rllib_llm/textworld``), so training and tests run with no downloaded data.

``reset(seed)`` picks the game from the seed; with ``held_out_fraction`` > 0 that part of the games is kept
for held-out seeds (:class:`~rllib_llm.envs.base.HeldOutSplit`: evaluation plays games training never saw;
with ALFWorld's data, evaluating on ``split="valid_seen"`` / ``"valid_unseen"`` is the usual way). Actions are the admissible commands (shown as
``available_actions``, matched ignoring case and extra spaces; others are an invalid no-op); reward is ``success_reward`` when the game is won (10, as
verl-agent's ALFWorld); the episode ends when the game does (won or lost) or is truncated after ``max_steps``.
With ``expert_plan=True``, ``info["expert_plan"]`` holds TextWorld's optimal remaining commands (for
demonstrations and tests; planning costs time at every step).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, ClassVar

from rllib_llm.envs.alfworld.textworld_games import TextWorldGame, clean_feedback, generate_game, import_textworld
from rllib_llm.envs.base import HELD_OUT_SEED_OFFSET, HeldOutSplit, TextEnv

TASK_TYPES = {
    1: "pick_and_place_simple",
    2: "look_at_obj_in_light",
    3: "pick_clean_then_place_in_recep",
    4: "pick_heat_then_place_in_recep",
    5: "pick_cool_then_place_in_recep",
    6: "pick_two_obj_and_place",
}
SPLITS = {"train": "train", "valid_seen": "valid_seen", "valid_unseen": "valid_unseen"}
_TASK = re.compile(r"Your task is to:\s*(.+)")


def alfworld_data_dir() -> Path:
    return Path(os.environ.get("ALFWORLD_DATA", Path.home() / ".cache" / "alfworld"))


def collect_alfworld_games(data_path: str | Path, task_types: tuple[int, ...] = tuple(TASK_TYPES)) -> list[str]:
    """Solvable ALFWorld game files under ``data_path`` (sorted, so a seed always maps to the same game)."""
    wanted = {TASK_TYPES[t] for t in task_types}
    games = []
    for root, _, files in os.walk(data_path):
        if "traj_data.json" not in files or "movable" in root or "Sliced" in root:
            continue
        game_file = Path(root) / "game.tw-pddl"
        if not game_file.exists():
            continue
        with open(Path(root) / "traj_data.json") as f:
            if json.load(f).get("task_type") not in wanted:
                continue
        with open(game_file) as f:
            if not json.load(f).get("solvable", False):
                continue
        games.append(str(game_file))
    return sorted(games)


def _alfworld_wrappers() -> list[Any]:
    try:
        from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
    except ImportError as e:
        raise ImportError(f"mode='alfworld' needs the ALFWorld package: pip install alfworld ({e})") from e
    return [AlfredDemangler(shuffle=False), AlfredInfos]


class AlfWorldEnv(TextEnv):
    prompt_template: ClassVar[str] = (
        "You are an expert agent operating in the ALFRED Embodied Environment. Your task is to: "
        "{task_description}\n{memory}You are now at step {current_step} and your current observation is: "
        "{current_observation}\nYour admissible actions of the current situation are: [{available_actions}].\n"
        "Think briefly, then choose one admissible action and give it inside <action> </action> tags."
    )

    def __init__(
        self,
        mode: str = "local",
        max_steps: int = 50,
        success_reward: float = 10.0,
        expert_plan: bool = False,
        # local mode
        num_games: int = 8,
        game_seed_offset: int = 0,
        nb_rooms: int = 3,
        nb_objects: int = 5,
        quest_length: int = 3,
        cache_dir: str | None = None,
        # alfworld mode
        data_path: str | None = None,
        split: str = "train",
        task_types: tuple[int, ...] = tuple(TASK_TYPES),
        held_out_fraction: float = 0.0,
        held_out_seeds_from: int = HELD_OUT_SEED_OFFSET,
    ) -> None:
        super().__init__()
        if mode not in ("local", "alfworld"):
            raise ValueError(f"mode must be 'local' or 'alfworld', got {mode!r}")
        import_textworld()  # fail at construction, with the install hint, not at the first reset
        self.mode, self.max_steps, self.success_reward = mode, max_steps, success_reward
        self.expert_plan = expert_plan
        self.local_args = {
            "nb_rooms": nb_rooms,
            "nb_objects": nb_objects,
            "quest_length": quest_length,
            "cache_dir": cache_dir,
        }
        self.game_seeds = [game_seed_offset + i for i in range(num_games)]
        self.game_files: list[str] = []
        self._wrappers: list[Any] | None = None
        if mode == "alfworld":
            if split not in SPLITS:
                raise ValueError(f"split must be one of {sorted(SPLITS)}, got {split!r}")
            self._wrappers = _alfworld_wrappers()
            root = Path(data_path) if data_path else alfworld_data_dir() / "json_2.1.1" / SPLITS[split]
            self.game_files = collect_alfworld_games(root, task_types)
            if not self.game_files:
                raise FileNotFoundError(
                    f"No ALFWorld games under {root}. Download them with `alfworld-download` "
                    "(or set ALFWORLD_DATA / data_path), or use mode='local'."
                )
        keys = self.game_files or [str(g) for g in self.game_seeds]
        self.split = HeldOutSplit(keys, held_out_fraction, held_out_seeds_from)
        self.game: TextWorldGame | None = None
        self._loaded = ""
        self.obs = ""
        self.admissible: list[str] = []
        self.plan: list[str] = []
        self.steps = 0
        self.won = False

    def _game_file(self, index: int) -> str:
        if self.mode == "alfworld":
            return self.game_files[index]
        return str(generate_game(self.game_seeds[index], **self.local_args))

    @property
    def num_games(self) -> int:
        return len(self.game_files) if self.mode == "alfworld" else len(self.game_seeds)

    def _info(self, valid: bool, **extra: Any) -> dict[str, Any]:
        return {
            "is_action_valid": valid,
            "won": self.won,
            "anchor_obs": self.obs,
            "available_actions": list(self.admissible),
            **({"expert_plan": list(self.plan)} if self.expert_plan else {}),
            **extra,
        }

    def _set_admissible(self, infos: dict[str, Any]) -> None:
        self.admissible = [c for c in infos.get("admissible_commands") or [] if c != "help"]
        self.plan = list(infos.get("policy_commands") or []) if self.expert_plan else []

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        """Plays game ``options["game_index"]`` if given, else one drawn from the seed."""
        super().reset(seed=seed)
        options = options or {}
        index = int(options["game_index"]) if "game_index" in options else self.split.index(seed, self.np_random)
        game_file = self._game_file(index)
        if game_file != self._loaded:
            if self.game is not None:
                self.game.close()
            self.game = TextWorldGame(
                game_file,
                max_episode_steps=10 * self.max_steps + 10,
                wrappers=self._wrappers,
                policy_commands=self.expert_plan,
            )
            self._loaded = game_file
        assert self.game is not None
        raw, infos = self.game.reset()
        self.obs = clean_feedback(raw)
        objective = infos.get("objective") or ""
        task = _TASK.search(self.obs)
        self.task_description = (task.group(1).strip() if task else clean_feedback(objective)) or self.obs
        if self.mode == "local" and objective:
            # the local opening text repeats the objective above the room description; keep the room only
            room = clean_feedback(infos.get("description") or "")
            self.obs = room or self.obs
        self._set_admissible(infos)
        self.steps, self.won = 0, False
        return self.obs, self._info(True, game_index=index, game_file=game_file)

    def step(self, action: str | None) -> tuple[str, float, bool, bool, dict]:
        if self.game is None:
            raise RuntimeError("Call reset() before step()")
        self.steps += 1
        typed = " ".join(action.strip().split()).lower() if isinstance(action, str) else ""
        command = next((c for c in self.admissible if c.lower() == typed), "")
        valid = bool(command)
        done = False
        if valid:
            raw, _, done, infos = self.game.step(command)
            self.obs = clean_feedback(raw)
            self.won = bool(infos.get("won"))
            self._set_admissible(infos)
        reward = self.success_reward if (valid and self.won) else 0.0
        terminated = done or self.won
        truncated = not terminated and self.steps >= self.max_steps
        return self.obs, reward, terminated, truncated, self._info(valid)

    def close(self) -> None:
        if self.game is not None:
            self.game.close()
            self.game = None
        super().close()

    def render(self) -> str:
        return self.obs

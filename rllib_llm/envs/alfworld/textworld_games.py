"""TextWorld plumbing shared by both ALFWorld modes: play one game file through ``textworld.gym`` with the
admissible-commands info, and generate local games with TextWorld's generator (seeded, cached on disk).

``textworld`` is imported lazily so that importing the env suite never needs it.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any

REQUEST = ("admissible_commands", "won", "lost", "score", "max_score", "objective", "description", "feedback")


def import_textworld() -> Any:
    try:
        import textworld
        import textworld.gym
    except ImportError as e:
        raise ImportError(
            f"The ALFWorld env needs TextWorld: pip install textworld (ALFWorld data mode: pip install alfworld) ({e})"
        ) from e
    return textworld


def clean_feedback(text: str) -> str:
    """Drops TextWorld's ASCII banner, the '>' prompt line with the status bar, and extra blank lines."""
    text = re.sub(r"\n\s*>[^\n]*$", "", text.rstrip())
    lines = [line.rstrip() for line in text.splitlines()]
    # ALFWorld opens with a welcome line; TextWorld's banner is drawn with $ | \\ / < > _ only
    lines = [line for line in lines if not line.startswith(("-= Welcome to TextWorld", "Would you like to RESTART"))]
    lines = [line for line in lines if not line.strip() or not re.fullmatch(r"[\s$|\\/_<>]+", line)]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


class TextWorldGame:
    """One game file played through ``textworld.gym`` (batch of 1), returning plain str/dict results."""

    def __init__(
        self,
        game_file: str | Path,
        max_episode_steps: int = 1000,
        wrappers: list[Any] | None = None,
        policy_commands: bool = False,
    ) -> None:
        textworld = import_textworld()
        requested = {k: True for k in REQUEST} | {"policy_commands": policy_commands}
        infos = textworld.EnvInfos(**requested, extras=["gamefile"] if wrappers else [])
        env_id = textworld.gym.register_game(
            str(game_file), infos, max_episode_steps=max_episode_steps, wrappers=wrappers or []
        )
        self._env = textworld.gym.make(env_id)
        self.game_file = str(game_file)
        self.score = 0

    def reset(self) -> tuple[str, dict[str, Any]]:
        with warnings.catch_warnings():  # jericho: generated games lack its per-game score/move tables
            warnings.filterwarnings("ignore", message=".*is not fully supported")
            obs, infos = self._env.reset()
        self.score = int(infos.get("score") or 0)
        return obs, infos

    def step(self, command: str) -> tuple[str, float, bool, dict[str, Any]]:
        """(feedback, score gained by this step, done, infos)."""
        obs, score, done, infos = self._env.step(command)
        gained, self.score = float(score) - self.score, int(score)
        return obs, gained, bool(done), infos

    def close(self) -> None:
        self._env.close()


def default_cache_dir() -> Path:
    return Path(os.environ.get("RLLIB_LLM_CACHE", Path.home() / ".cache" / "rllib_llm")) / "textworld"


def generate_game(
    seed: int,
    nb_rooms: int = 3,
    nb_objects: int = 5,
    quest_length: int = 3,
    cache_dir: str | Path | None = None,
) -> Path:
    """Generates (once; then reuses) a TextWorld game for ``seed`` with TextWorld's own generator.

    Same arguments, same game: TextWorld seeds every random choice from ``options.seeds``; the file name
    carries the arguments, so a cache hit is the same game. The game is made in a private folder and
    published by renames, its ``.json`` last, so runs sharing the cache never open a half-written game.
    """
    textworld = import_textworld()
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    key = f"r{nb_rooms}_o{nb_objects}_q{quest_length}_s{seed}"
    tag = hashlib.sha1(f"{textworld.__version__}:{key}".encode()).hexdigest()[:8]
    path = cache / f"tw_{key}_{tag}.z8"
    if path.exists() and path.with_suffix(".json").exists():
        return path
    options = textworld.GameOptions()
    options.seeds = seed
    options.nb_rooms, options.nb_objects, options.quest_length = nb_rooms, nb_objects, quest_length
    options.force_recompile = True
    workdir = Path(tempfile.mkdtemp(prefix=f".{key}_", dir=cache))
    try:
        options.path = str(workdir / path.name)
        textworld.make(options)
        for made in sorted(workdir.iterdir(), key=lambda f: f.suffix == ".json"):
            os.replace(made, cache / made.name)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return path

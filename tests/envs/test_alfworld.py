from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from rllib_llm.envs import make_env
from rllib_llm.envs.alfworld import AlfWorldEnv, clean_feedback, collect_alfworld_games, generate_game
from rllib_llm.envs.base import HELD_OUT_SEED_OFFSET
from tests.envs.conftest import check_step

pytest.importorskip("textworld")

GAME = {"nb_rooms": 2, "nb_objects": 3, "quest_length": 2}


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One locally generated TextWorld game (seed 0), shared by the tests of this module."""
    cache = tmp_path_factory.mktemp("textworld")
    generate_game(0, cache_dir=cache, **GAME)
    return str(cache)


def _env(cache_dir: str, **kwargs: object) -> AlfWorldEnv:
    return make_env("ALFWorld", {"num_games": 1, "cache_dir": cache_dir, **GAME, **kwargs})


def test_expert_plan_wins_the_generated_game(cache_dir: str) -> None:
    env = _env(cache_dir, expert_plan=True)
    obs, info = env.reset(seed=3)
    assert "$$" not in obs and obs.startswith("-=") and env.task_description
    assert info["available_actions"] and "help" not in info["available_actions"]
    steps = 0
    while True:
        action = info["expert_plan"][0]
        assert action in info["available_actions"]
        obs, reward, term, trunc, info = check_step(env.step(action), valid=True)
        steps += 1
        if term or trunc:
            break
    assert term and info["won"] and reward == 10.0 and steps <= 5
    assert "RESTART" not in obs


def test_inadmissible_actions_are_no_ops(cache_dir: str) -> None:
    env = _env(cache_dir)
    obs, info = env.reset(seed=0)
    for bad in (None, "", "fly to the moon", "<action>look</action>", 12, "look around"):
        new_obs, reward, term, _, new_info = check_step(env.step(bad), valid=False)  # type: ignore[arg-type]
        assert new_obs == obs and reward == 0.0 and not term
        assert new_info["available_actions"] == info["available_actions"]
    check_step(env.step("  LOOK "), valid=True)  # case and extra spaces are tolerated


def test_seeded_reset_and_truncation(cache_dir: str) -> None:
    a, b = _env(cache_dir, max_steps=2), _env(cache_dir, max_steps=2)
    assert a.reset(seed=5)[0] == b.reset(seed=5)[0]
    assert a.task_description == b.task_description
    check_step(a.step("inventory"), valid=True)
    _, _, term, trunc, _ = check_step(a.step("inventory"), valid=True)
    assert trunc and not term
    a.reset(seed=5)  # the same game file is reused, and the game restarts
    assert a.steps == 0 and a.obs == b.obs


def test_generated_games_are_cached(cache_dir: str) -> None:
    path = generate_game(0, cache_dir=cache_dir, **GAME)
    mtime = path.stat().st_mtime
    assert generate_game(0, cache_dir=cache_dir, **GAME) == path and path.stat().st_mtime == mtime
    assert json.loads(path.with_suffix(".json").read_text())["objective"]


def test_a_game_is_published_complete_json_last(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs share the cache: a game being made must not be visible at its final path (a reader that finds
    the .json opens the .z8), so it is made elsewhere and renamed into place, the .json last."""
    import textworld

    seen: list[tuple[str, bool]] = []
    real_replace = os.replace

    def make(options: object) -> None:
        made = Path(options.path)  # type: ignore[attr-defined]
        assert made.parent != tmp_path
        for suffix in (".z8", ".json", ".ni"):
            made.with_suffix(suffix).write_text(suffix)

    def replace(src: str | Path, dst: str | Path) -> None:
        seen.append((Path(dst).suffix, Path(dst).with_suffix(".json").exists()))
        real_replace(src, dst)

    monkeypatch.setattr(textworld, "make", make)
    monkeypatch.setattr(os, "replace", replace)
    path = generate_game(7, cache_dir=tmp_path, **GAME)
    assert [suffix for suffix, _ in seen][-1] == ".json" and not any(json_there for _, json_there in seen)
    assert path.read_text() == ".z8" and sorted(p.name for p in tmp_path.iterdir()) == sorted(
        path.with_suffix(s).name for s in (".json", ".ni", ".z8"))  # no work folder left behind


def test_clean_feedback() -> None:
    raw = "\n\n  ________  __\n | $$  \\$$ >$$\n\nYou pick up the key.\n\n\n\n>   -= Attic =-0/2"
    assert clean_feedback(raw) == "You pick up the key."
    assert clean_feedback("-= Welcome to TextWorld, ALFRED! =-\n\nYou are in a room.") == "You are in a room."


def _write_traj(root: Path, name: str, task_type: str, solvable: bool = True, game: bool = True) -> None:
    d = root / name
    d.mkdir(parents=True)
    (d / "traj_data.json").write_text(json.dumps({"task_type": task_type}))
    if game:
        (d / "game.tw-pddl").write_text(json.dumps({"solvable": solvable}))


def test_collect_alfworld_games_filters_like_alfred_tw_env(tmp_path: Path) -> None:
    _write_traj(tmp_path, "pick_and_place_simple-Mug-None-Shelf-1/trial_1", "pick_and_place_simple")
    _write_traj(tmp_path, "pick_two_obj_and_place-Pen-None-Desk-2/trial_1", "pick_two_obj_and_place")
    _write_traj(tmp_path, "look_at_obj_in_light-Book-None-Lamp-3/trial_1", "look_at_obj_in_light", solvable=False)
    _write_traj(
        tmp_path,
        "pick_heat_then_place_in_recep-Apple-None-Fridge-4/trial_1",
        "pick_heat_then_place_in_recep",
        game=False,
    )
    _write_traj(tmp_path, "pick_and_place_simple-movable-Plate-5/trial_1", "pick_and_place_simple")
    games = collect_alfworld_games(tmp_path)
    assert [Path(g).parent.parent.name for g in games] == [
        "pick_and_place_simple-Mug-None-Shelf-1",
        "pick_two_obj_and_place-Pen-None-Desk-2",
    ]
    assert len(collect_alfworld_games(tmp_path, task_types=(1,))) == 1


def test_alfworld_mode_without_package_or_data_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises((ImportError, FileNotFoundError), match="alfworld"):
        AlfWorldEnv(mode="alfworld", data_path=str(tmp_path))
    with pytest.raises(ValueError):
        AlfWorldEnv(mode="thor")


@pytest.mark.skipif(not os.environ.get("ALFWORLD_DATA"), reason="needs ALFWorld data (alfworld-download)")
def test_real_alfworld_game_if_data_present() -> None:
    env = AlfWorldEnv(mode="alfworld", split="valid_seen")
    obs, info = env.reset(seed=0)
    assert "Your task is to" not in obs or env.task_description
    check_step(env.step(info["available_actions"][0]), valid=True)


def test_alfworld_mode_collects_games_from_the_data_tree(tmp_path: Path) -> None:
    pytest.importorskip("alfworld")
    _write_traj(tmp_path, "pick_and_place_simple-Mug-None-Shelf-1/trial_1", "pick_and_place_simple")
    _write_traj(tmp_path, "pick_cool_then_place_in_recep-Egg-None-Fridge-2/trial_1", "pick_cool_then_place_in_recep")
    env = AlfWorldEnv(mode="alfworld", data_path=str(tmp_path), task_types=(1, 5))
    assert env.num_games == 2 and all(f.endswith("game.tw-pddl") for f in env.game_files)
    assert AlfWorldEnv(mode="alfworld", data_path=str(tmp_path), task_types=(5,)).num_games == 1


def test_held_out_seeds_play_local_games_that_training_seeds_never_draw(cache_dir: str) -> None:
    env = _env(cache_dir, num_games=4, held_out_fraction=0.25)
    assert len(env.split.held_out) == 1
    trained = {env.split.index(seed, np.random.default_rng(seed)) for seed in range(200)}
    assert trained == set(env.split.training)
    env.reset(seed=HELD_OUT_SEED_OFFSET)
    assert env._loaded == env._game_file(env.split.held_out[0])

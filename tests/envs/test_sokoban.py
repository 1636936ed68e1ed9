from __future__ import annotations

import numpy as np
import pytest

from rllib_llm.envs import make_env
from rllib_llm.envs.sokoban import Level, SokobanEnv, generate_level, solve
from rllib_llm.envs.sokoban.env import substring_move
from tests.envs.conftest import check_step

LINE = "#######\n#P_X_O#\n#######"


def test_same_seed_same_level_and_seeds_differ() -> None:
    a, b = SokobanEnv(num_boxes=2), SokobanEnv(num_boxes=2)
    assert a.reset(seed=11)[0] == b.reset(seed=11)[0]
    levels = {SokobanEnv(num_boxes=2).reset(seed=s)[0] for s in range(10)}
    assert len(levels) > 5


@pytest.mark.parametrize("num_boxes", [1, 2])
def test_optimal_solution_wins_with_gym_sokoban_rewards(num_boxes: int) -> None:
    env = make_env("Sokoban", {"num_boxes": num_boxes})
    obs, info = env.reset(seed=3)
    assert not info["won"] and len(env.solution) >= env.min_solution_length
    total, on_target = 0.0, info["boxes_on_target"]
    for i, action in enumerate(env.solution):
        obs, reward, terminated, truncated, info = check_step(env.step(action), valid=True)
        delta = info["boxes_on_target"] - on_target
        on_target = info["boxes_on_target"]
        expected = -0.1 + delta + (10.0 if info["won"] else 0.0)
        assert reward == pytest.approx(expected)
        total += reward
        assert terminated is (i == len(env.solution) - 1)
        assert not truncated
    assert info["won"] and "X" not in obs


def test_push_on_and_off_target_rewards() -> None:
    level = """
########
#P_X_O_#
#X_____#
#O######
########
"""
    env = SokobanEnv(dim_room=(5, 8))
    env.reset(seed=0, options={"level": level})
    _, r, *_ = check_step(env.step("right"), valid=True)  # walk
    assert r == pytest.approx(-0.1)
    _, r, *_ = check_step(env.step("right"), valid=True)  # push box to (1, 4)
    assert r == pytest.approx(-0.1)
    _, r, term, _, info = check_step(env.step("right"), valid=True)  # box onto target (1, 5)
    assert r == pytest.approx(0.9) and info["boxes_on_target"] == 1 and not term
    _, r, _, _, info = check_step(env.step("right"), valid=True)  # box pushed off the target
    assert r == pytest.approx(-1.1) and info["boxes_on_target"] == 0


def test_bad_actions_are_invalid_no_ops() -> None:
    env = SokobanEnv()
    obs, info = env.reset(seed=5)
    for bad in (None, "", "jump", "up up", "<action>up</action>", 3):
        new_obs, reward, term, _, new_info = check_step(env.step(bad), valid=False)  # type: ignore[arg-type]
        assert new_obs == obs and new_info["anchor_obs"] == info["anchor_obs"]
        assert reward == pytest.approx(-0.1) and not term
    assert check_step(env.step(" Left "))[4]["is_action_valid"]


def test_substring_matching_reads_actions_as_verl_agent() -> None:
    room = "#######\n#P_X_O#\n#_____#\n#######"
    exact, loose = SokobanEnv(dim_room=(4, 7)), SokobanEnv(dim_room=(4, 7), action_matching="substring")
    start = exact.reset(seed=0, options={"level": room})[0]
    assert loose.reset(seed=0, options={"level": room})[0] == start
    assert check_step(exact.step("move right"), valid=False)[0] == start
    moved, reward, *_ = check_step(loose.step("move right"), valid=True)
    assert moved != start and moved == check_step(exact.step("right"), valid=True)[0] and reward == pytest.approx(-0.1)
    still, reward, *_ = check_step(loose.step("still"), valid=True)  # verl-agent's no-op is a valid action
    assert still == moved and reward == pytest.approx(-0.1)
    check_step(exact.step("still"), valid=False)
    check_step(loose.step("jump"), valid=False)
    assert substring_move("push upright") == "up" and substring_move("leftover") == "left"  # pool order, as theirs
    with pytest.raises(ValueError, match="action_matching must be one of"):
        SokobanEnv(action_matching="fuzzy")


def test_wall_bump_is_valid_and_changes_nothing() -> None:
    env = SokobanEnv()
    obs, _ = env.reset(seed=0, options={"level": "#####\n#P#X#\n#__O#\n#####"})
    new_obs, *_ = check_step(env.step("up"), valid=True)
    assert new_obs == obs


def test_verl_agents_reset_quirk_scores_a_box_already_on_a_target_on_the_first_step_only_when_asked() -> None:
    """notes/parity.md: gym-sokoban (verl-agent's) starts its boxes-on-target count at 0, so a level with a box
    already on a target earns +1 on the first step whatever the move; later steps score real pushes only."""
    level = "######\n#P_*_#\n#_X_O#\n#____#\n######"  # two boxes, one on a target
    for zeroed, first in ((False, -0.1), (True, 0.9)):
        env = SokobanEnv(dim_room=(5, 6), num_boxes=2, zero_boxes_on_target_at_reset=zeroed)
        env.reset(seed=0, options={"level": level})
        assert env.step("up")[1] == pytest.approx(first)  # into the wall: nothing moved
        assert env.step("up")[1] == pytest.approx(-0.1)
        assert env.step("right")[1] == pytest.approx(-0.1)
        assert env.step("right")[1] == pytest.approx(-1.1)  # pushes the box off its target


def test_truncation_at_max_steps() -> None:
    env = SokobanEnv(max_steps=3)
    env.reset(seed=1)
    results = [env.step("nonsense") for _ in range(3)]
    assert [r[3] for r in results] == [False, False, True]


def test_image_observation_tracks_the_player() -> None:
    env = SokobanEnv(image_obs=True, tile_size=8)
    obs, _ = env.reset(seed=0, options={"level": "#####\n#P__#\n#_XO#\n#####"})
    img = obs["image"]
    assert img.dtype == np.uint8 and img.shape == (48, 48, 3)
    assert env.observation_space.contains(obs)
    player_tile = img[8:16, 8:16]
    obs2, *_ = env.step("right")
    assert not np.array_equal(obs2["image"][8:16, 8:16], player_tile)
    assert np.array_equal(obs2["image"][8:16, 16:24], player_tile)


def test_solver_on_unsolvable_and_text_round_trip() -> None:
    stuck = Level.from_text("#####\n#X__#\n#_P_#\n#__O#\n#####")  # box in a corner
    assert solve(stuck) is None
    level, solution = generate_level(np.random.default_rng(0), (6, 6), 2)
    assert Level.from_text(level.to_text()) == level
    assert not level.solved and solve(level) == solution
    for action in solution:
        level = level.move(action)
    assert level.solved


def test_level_larger_than_room_is_rejected() -> None:
    with pytest.raises(ValueError, match="does not fit"):
        SokobanEnv(dim_room=(6, 6)).reset(seed=0, options={"level": "#" * 8 + "\n#P_X_O_#\n" + "#" * 8})


def test_level_parser_rejects_garbage() -> None:
    with pytest.raises(ValueError):
        Level.from_text("###\n#?#\n###")
    with pytest.raises(ValueError):
        Level.from_text(LINE.replace("X", "_"))

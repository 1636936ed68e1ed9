from rllib_llm.envs import make_env


def test_same_seed_same_start_and_solved_episode():
    env, twin = make_env("NumberLine"), make_env("NumberLine")
    obs, info = env.reset(seed=7)
    assert twin.reset(seed=7)[0] == obs
    assert env.target != env.position
    move = "+" if env.target > env.position else "-"
    for _ in range(abs(env.target - env.position)):
        obs, reward, terminated, truncated, info = env.step(move)
    assert terminated and reward == 1.0 and info["won"] and info["is_action_valid"]


def test_invalid_actions_are_no_ops_flagged_invalid_and_truncate_at_cap():
    env = make_env("NumberLine", {"max_position": 5, "max_steps": 2})
    obs, _ = env.reset(seed=0)
    for action in [None, "jump"]:
        new_obs, reward, terminated, truncated, info = env.step(action)
        assert new_obs == obs and reward == -1.0 and not info["is_action_valid"]  # a no-op is not closer
    assert truncated and not terminated


def test_pointer_stays_on_the_line():
    env = make_env("NumberLine", {"max_position": 2, "max_steps": 10})
    env.reset(seed=1)
    for _ in range(5):
        env.step("-")
    assert env.position == 0


def test_away_penalty_rewards_each_move_that_does_not_get_closer():
    """RL4VLM's gym_cards reward: -1 for a move away or into the end of the line, 0 closer, 1 on the target."""
    import pytest

    env = make_env("NumberLine", {"max_position": 3, "max_steps": 10, "away_penalty": -1.0})
    env.reset(seed=0)
    env.target, env.position = 1, 2
    assert env.step("+")[1] == -1.0  # 2 -> 3: away
    assert env.step("+")[1] == -1.0  # stays at 3, the end of the line: not closer
    assert env.step("jump")[1] == -1.0  # unparseable: a no-op, not closer (the runner adds its invalid penalty)
    assert env.step("-")[1] == 0.0  # 3 -> 2: closer
    _, reward, terminated, _, _ = env.step("-")
    assert reward == 1.0 and terminated
    default = make_env("NumberLine")
    default.reset(seed=0)
    default.target, default.position = 1, 2
    assert default.step("+")[1] == -1.0  # RL4VLM's reward is the default
    success_only = make_env("NumberLine", {"away_penalty": 0.0})
    success_only.reset(seed=0)
    success_only.target, success_only.position = 1, 2
    assert success_only.step("+")[1] == 0.0
    with pytest.raises(ValueError, match="away_penalty must be a number <= 0"):
        make_env("NumberLine", {"away_penalty": 1})


def test_an_unparseable_step_scores_as_verl_agent_with_invalid_reward_zero():
    """verl-agent gives an invalid action 0 (its only penalty the runner's); ours the away penalty (the pointer
    did not get closer). Valid moves score the same either way."""
    ours, theirs = make_env("NumberLine"), make_env("NumberLine", {"invalid_reward": 0.0})
    for env, invalid in ((ours, -1.0), (theirs, 0.0)):
        env.reset(seed=0)
        env.target, env.position = 1, 3
        assert env.step("jump")[1] == invalid and env.step(None)[1] == invalid
        assert env.step("+")[1] == -1.0 and env.step("-")[1] == 0.0  # 3 -> 4 away; 4 -> 3 closer

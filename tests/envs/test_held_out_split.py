"""Held-out seeds play tasks that training seeds never draw (Search's questions, ALFWorld's local games)."""

import numpy as np
import pytest

from rllib_llm.envs.base import HELD_OUT_SEED_OFFSET, HeldOutSplit
from rllib_llm.envs.search import SearchEnv


def test_a_split_keeps_its_fraction_apart_whatever_the_order_of_the_pool():
    keys = [f"q{i}" for i in range(100)]
    split = HeldOutSplit(keys, 0.2)
    assert len(split.held_out) == 20 and sorted(split.held_out + split.training) == list(range(100))
    reversed_split = HeldOutSplit(keys[::-1], 0.2)
    assert {keys[i] for i in split.held_out} == {keys[::-1][i] for i in reversed_split.held_out}
    assert HeldOutSplit(["a", "b"], 0.01).held_out != []  # at least one task when asked for some
    assert HeldOutSplit(["a"], 0.5).held_out == []  # a pool of one cannot spare its task
    with pytest.raises(ValueError, match="held_out_fraction"):
        HeldOutSplit(keys, 1.0)


def test_training_seeds_draw_only_training_tasks_and_held_out_seeds_walk_the_held_out_ones():
    split = HeldOutSplit([str(i) for i in range(10)], 0.3, from_seed=1000)
    drawn = {split.index(seed, np.random.default_rng(seed)) for seed in range(500)}
    assert drawn == set(split.training)
    assert [split.index(1000 + k, np.random.default_rng(0)) for k in range(4)] == split.held_out + split.held_out[:1]


def test_search_evaluates_on_questions_training_never_asks():
    env = SearchEnv()
    asked = set()
    for seed in range(3000):
        env.reset(seed=seed)
        asked.add(env.question_id)
    held_out = []
    for seed in range(HELD_OUT_SEED_OFFSET, HELD_OUT_SEED_OFFSET + 64):
        env.reset(seed=seed)
        held_out.append(env.question_id)
    assert len(set(held_out)) == 64 and not asked & set(held_out)
    assert asked <= {env.questions[i]["id"] for i in env.split.training} and len(env.split.held_out) == 130
    env.reset(seed=HELD_OUT_SEED_OFFSET + 3)
    again = env.question_id
    env.reset(seed=HELD_OUT_SEED_OFFSET + 3)
    assert env.question_id == again  # a held-out seed is one fixed question


def test_without_a_held_out_part_every_seed_draws_from_every_question():
    env = SearchEnv(held_out_fraction=0.0)
    asked = set()
    for seed in range(6000):
        env.reset(seed=seed)
        asked.add(env.question_id)
    assert len(asked) == len(env.questions)

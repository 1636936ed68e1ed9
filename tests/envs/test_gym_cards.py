from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from rllib_llm.envs import make_env
from rllib_llm.envs.gym_cards import BlackjackEnv, EZPointsEnv, Points24Env
from rllib_llm.envs.gym_cards.blackjack import hand_value
from rllib_llm.envs.gym_cards.cards import Card
from rllib_llm.envs.gym_cards.formula import FormulaError, card_overlap, evaluate_formula, find_solution
from tests.envs.conftest import check_step


# -- formula parsing -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("formula", "cards", "ops", "value"),
    [
        ("2*6", [2, 6], "+*", 12),
        ("(6 + 6)", [6, 6], "+*", 12),
        ("2 x 6 = 12", [2, 6], "+*", 12),
        ("J+2", [10, 2], "+*", 12),
        ("8/(3-8/3)", [8, 3, 8, 3], "+-*/", 24),
        ("(1+2)/4*3", [1, 2, 4, 3], "+-*/", Fraction(9, 4)),
    ],
)
def test_formulas_evaluate_exactly(formula: str, cards: list[int], ops: str, value: Fraction) -> None:
    faces = {"J": 10, "Q": 10, "K": 10}
    assert evaluate_formula(formula, cards, ops, faces) == value


@pytest.mark.parametrize(
    "formula",
    [
        "",
        "2-6",  # operator not allowed in EZPoints
        "2*6*1",  # extra number
        "12",  # cards not used
        "__import__('os').system('true')",
        "2**6",
        "-2*-6",
        "2.0*6",
        "2*6=13=12",
        "2*6 = twelve",
        "(" * 300,
    ],
)
def test_bad_formulas_raise(formula: str) -> None:
    with pytest.raises(FormulaError):
        evaluate_formula(formula, [2, 6], "+*")


def test_division_by_zero_is_invalid() -> None:
    with pytest.raises(FormulaError, match="zero"):
        evaluate_formula("3/(2-2)+1", [3, 2, 2, 1], "+-*/")


def test_solver_finds_and_rejects() -> None:
    sol = find_solution([8, 3, 8, 3], 24)
    assert sol is not None and evaluate_formula(sol, [8, 3, 8, 3]) == 24
    assert find_solution([1, 1, 1, 1], 24) is None
    assert find_solution([5, 5], 12, "+*") is None


# -- EZPoints / 24 ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("alias", "n", "target"), [("EZPoints", 2, 12), ("Points24", 4, 24)])
def test_solved_episode(alias: str, n: int, target: int) -> None:
    env = make_env(alias)
    obs, info = env.reset(seed=7)
    assert obs.startswith("Cards: ") and len(env.cards) == n
    assert info["prompt_slots"]["target"] == target
    _, reward, term, trunc, info = check_step(env.step(env.solution()), valid=True)
    assert (reward, term, trunc, info["won"]) == (1.0, True, False, True)


def test_wrong_value_is_valid_and_allows_retry_then_truncates() -> None:
    env = EZPointsEnv(max_steps=2)
    env.reset(seed=0, options=None)
    a, b = env.values
    wrong = f"{a}+{b}" if a + b != 12 else f"{a}*{b}"
    obs, reward, term, trunc, info = check_step(env.step(wrong), valid=True)
    assert reward == 0.0 and not term and not trunc and "not 12" in obs
    obs, reward, term, trunc, info = check_step(env.step(None), valid=False)
    assert trunc and not term and not info["won"] and "Invalid formula" in obs


def test_invalid_formulas_in_env_never_crash() -> None:
    env = Points24Env(max_steps=50)
    env.reset(seed=3)
    for bad in (None, "", "1/0", "open('x')", "24", "lambda: 24", 24, "\x00"):
        _, reward, term, *_ = check_step(env.step(bad), valid=False)  # type: ignore[arg-type]
        assert reward == 0.0 and not term


def test_face_card_values_option() -> None:
    env = Points24Env(face_cards_as_10=False)
    for seed in range(40):
        env.reset(seed=seed)
        if any(c.rank in "JQK" for c in env.cards):
            break
    assert {11, 12, 13} & set(env.values)
    assert evaluate_formula(env.solution(), env.values) == 24


def test_same_seed_same_hand_and_only_solvable_hands() -> None:
    hands = set()
    for seed in range(15):
        a, b = Points24Env(), Points24Env()
        assert a.reset(seed=seed)[0] == b.reset(seed=seed)[0]
        assert a.solution() is not None
        hands.add(tuple(a.values))
    assert len(hands) > 10


def test_card_images() -> None:
    env = EZPointsEnv(image_obs=True)
    obs, _ = env.reset(seed=1)
    assert env.observation_space.contains(obs)
    other = EZPointsEnv(image_obs=True)
    for seed in range(2, 20):
        obs2, _ = other.reset(seed=seed)
        if other.values != env.values:
            break
    assert not np.array_equal(obs["image"], obs2["image"])


# -- Blackjack ----------------------------------------------------------------------------------------------
def test_hand_values() -> None:
    assert hand_value([Card("A"), Card("K")]) == (21, True)
    assert hand_value([Card("A"), Card("A"), Card("9")]) == (21, True)
    assert hand_value([Card("A"), Card("9"), Card("5")]) == (15, False)
    assert hand_value([Card("Q"), Card("J"), Card("2")]) == (22, False)


@pytest.mark.parametrize(
    ("deck", "actions", "reward", "dealer_cards"),
    [
        (["10", "9", "10", "7"], ["stand"], 1.0, 2),  # 19 vs 17: dealer stands on 17
        (["10", "7", "10", "7"], ["stand"], 0.0, 2),  # push
        (["10", "6", "10", "5", "2"], ["stand"], -1.0, 3),  # dealer draws from 15 to 17, beats 16
        (["10", "6", "9", "A", "3"], ["hit", "stand"], -1.0, 2),  # 19 vs soft 20
        (["10", "6", "9", "7", "K"], ["hit"], -1.0, 2),  # bust ends the hand at once
        (["A", "K", "10", "7"], ["stand"], 1.0, 2),  # natural
        (["2", "3", "6", "5", "9", "4", "6"], ["hit", "hit", "stand"], 1.0, 3),  # 18 vs 17
        (["9", "7", "10", "6", "K"], ["stand"], 1.0, 3),  # dealer busts
    ],
)
def test_blackjack_scenarios(deck: list[str], actions: list[str], reward: float, dealer_cards: int) -> None:
    env = make_env("Blackjack")
    env.reset(seed=0, options={"deck": deck})
    for i, action in enumerate(actions):
        obs, r, term, trunc, info = check_step(env.step(action), valid=True)
        assert term is (i == len(actions) - 1)
    expected = _score(env)
    assert r == expected == reward, obs
    assert info["won"] is (reward > 0) and info["available_actions"] == []
    assert len(env.dealer) == dealer_cards and "Dealer's hand" in obs


def _score(env: BlackjackEnv) -> float:
    """Independent scoring for the scenario table."""
    p, d = hand_value(env.player)[0], hand_value(env.dealer)[0]
    if p > 21:
        return -1.0
    if len(env.player) == 2 and p == 21 and not (len(env.dealer) == 2 and d == 21):
        return 1.0
    return 1.0 if d > 21 or p > d else 0.0 if p == d else -1.0


def test_blackjack_bad_input_and_after_done() -> None:
    env = BlackjackEnv(max_steps=3)
    obs, info = env.reset(seed=5)
    assert "Dealer shows" in obs and info["available_actions"] == ["stand", "hit"]
    for bad in (None, "double", "", "HIT me"):
        new_obs, r, term, trunc, _ = check_step(env.step(bad), valid=False)
        assert new_obs == obs and r == 0.0 and not term
        if trunc:
            break
    assert trunc


def test_blackjack_natural_bonus_and_image() -> None:
    env = BlackjackEnv(natural_reward=1.5, image_obs=True)
    obs, _ = env.reset(seed=0, options={"deck": ["A", "K", "9", "7"]})
    hidden = obs["image"].copy()
    obs, r, *_ = env.step("stand")
    assert r == 1.5 and env.observation_space.contains(obs)
    assert not np.array_equal(hidden, obs["image"])  # hole card revealed


def test_blackjack_seeded_deals_repeat() -> None:
    a, b = BlackjackEnv(), BlackjackEnv()
    assert a.reset(seed=9)[0] == b.reset(seed=9)[0]
    assert a.step("hit")[0] == b.step("hit")[0]


@pytest.mark.parametrize(
    ("used", "cards", "overlap"),
    [
        ([1, 3, 6, 7], [7, 6, 3, 1], 1.0),
        ([1, 3, 6, 8], [1, 3, 6, 7], 0.75),  # one wrong number
        ([7, 10], [1, 6, 7, 10], 0.5),  # two missing
        ([1, 1, 7, 10], [1, 6, 7, 10], 0.75),  # a card used twice counts once
        ([1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 3, 4], 0.5),  # extra numbers lower it
        ([], [1, 2, 3, 4], 0.0),
    ],
)
def test_card_overlap_by_hand(used: list[int], cards: list[int], overlap: float) -> None:
    assert card_overlap(used, cards) == overlap


def test_points_env_reports_how_close_each_formula_was_to_the_cards() -> None:
    env = Points24Env(max_steps=50)
    env.reset(seed=3)
    a, b, c, d = env.values
    assert check_step(env.step(f"{a}+{b}+{c}+{d}"), valid=True)[4]["card_overlap"] == 1.0
    assert check_step(env.step(f"{a}+{b}"), valid=False)[4]["card_overlap"] == 0.5
    assert check_step(env.step(f"{a}+{b}+{c}+{d}+{d}"), valid=False)[4]["card_overlap"] == 0.8
    assert check_step(env.step("(1+"), valid=False)[4]["card_overlap"] == 0.0  # no formula at all
    with pytest.raises(FormulaError) as error:
        evaluate_formula("2*3", [2, 3, 4], "+-*/")
    assert error.value.numbers == [2, 3]


def test_blackjack_scored_as_verl_agent_scores_it() -> None:
    """notes/parity.md: a loss earns 0 there, and a natural against a dealer's 21 in three cards is a push
    (its natural check never fires); ours pays the natural and a loss -1."""
    natural_vs_21 = ["A", "K", "9", "5", "7"]  # player A K = 21 in two; dealer 9 5, draws 7 = 21 in three
    losing_stand = ["10", "6", "10", "5", "2"]  # 16 vs 17
    ours, theirs = BlackjackEnv(), BlackjackEnv(loss_reward=0.0, natural_beats_dealer_21=False)
    for env, natural, loss in ((ours, 1.0, -1.0), (theirs, 0.0, 0.0)):
        env.reset(seed=0, options={"deck": natural_vs_21})
        assert env.step("stand")[1] == natural and len(env.dealer) == 3
        env.reset(seed=0, options={"deck": losing_stand})
        assert env.step("stand")[1] == loss
        env.reset(seed=0, options={"deck": ["10", "6", "9", "7", "K"]})
        assert env.step("hit")[1] == loss  # a bust is a loss too
    theirs.reset(seed=0, options={"deck": ["A", "K", "9", "7"]})
    assert theirs.step("stand")[1] == 1.0  # a natural against a dealer's 16 -> 17 still pays


def verl_agent_points_outcome(formula: str, cards: list[int], target: int) -> tuple[bool, bool]:
    """(won, episode over) of a formula submitted to verl-agent's gym_cards Points game (after RL4VLM): the
    formula's tokens are the cards and operators, ``=`` ends the episode, and it wins when every card is used
    and Python's ``eval`` of the joined tokens equals the target."""
    import re

    assert re.fullmatch(r"[\d+\-*/() ]+", formula)  # arithmetic only: eval is safe here
    used = [int(n) for n in re.findall(r"\d+", formula)]
    try:
        value = eval(formula)  # noqa: S307 - their scoring, on a checked arithmetic string
    except ZeroDivisionError:
        return False, True
    return sorted(used) == sorted(cards) and value == target, True


def test_points_switches_reproduce_verl_agent_scoring_on_generated_formulas() -> None:
    """notes/parity.md: with ``retry_wrong_formula=False, solvable_only=False, arithmetic="float"`` every
    formula ends the episode and wins exactly when verl-agent's rules say so, over random hands (unsolvable
    ones too) and right, altered and card-dropping formulas; ``8/(3-8/3)`` is the rounding case."""
    rng = np.random.default_rng(0)
    theirs = Points24Env(retry_wrong_formula=False, solvable_only=False, arithmetic="float")
    ours = Points24Env()
    cases = wins = 0
    for seed in range(150):
        theirs.reset(seed=seed)
        cards = theirs.values
        solution = theirs.solution() or "+".join(map(str, cards))
        altered = solution.replace("*", "+", 1) if "*" in solution else solution.replace("+", "*", 1)
        dropped = "*".join(map(str, cards[:3]))
        shuffled = "*".join(map(str, rng.permutation(cards)))
        for formula in (solution, altered, dropped, shuffled):
            theirs.reset(seed=seed)
            _, reward, terminated, truncated, info = theirs.step(formula)
            won, over = verl_agent_points_outcome(formula, cards, 24)
            assert (info["won"], terminated or truncated) == (won, over), (cards, formula)
            assert reward == (1.0 if won else 0.0)
            cases, wins = cases + 1, wins + won
    assert cases == 600 and 50 < wins < 300
    # the rounding case: exact arithmetic scores it, float (theirs) does not
    for env, won in ((ours, True), (theirs, False)):
        env.reset(seed=0)
        env.cards = [Card("8"), Card("3"), Card("8"), Card("3")]
        _, _, terminated, _, info = env.step("8/(3-8/3)")
        assert info["won"] is won and terminated
    assert verl_agent_points_outcome("8/(3-8/3)", [8, 3, 8, 3], 24) == (False, True)


def test_unsolvable_hands_are_dealt_only_when_asked_and_a_wrong_formula_ends_the_episode_only_when_asked() -> None:
    counts = {}
    for solvable_only in (True, False):
        env = Points24Env(solvable_only=solvable_only)
        unsolvable = 0
        for seed in range(300):
            env.reset(seed=seed)
            unsolvable += env.solution() is None
        counts[solvable_only] = unsolvable
    assert counts[True] == 0 and 40 < counts[False] < 150  # verl-agent: 178 of 600
    for retry, over in ((True, False), (False, True)):
        env = EZPointsEnv(max_steps=3, retry_wrong_formula=retry)
        env.reset(seed=0)
        a, b = env.values
        wrong = f"{a}+{b}" if a + b != 12 else f"{a}*{b}"
        assert env.step(wrong)[2] is over
        env.reset(seed=0)
        assert env.step(f"{a}+{b}+1")[2] is over  # an ill-formed use of the cards is a formula too ("=" pressed)
        env.reset(seed=0)
        assert env.step(None)[2] is False  # no formula read: nothing was submitted
    with pytest.raises(ValueError, match="arithmetic must be one of"):
        Points24Env(arithmetic="decimal")

"""Env rules: tic-tac-toe wins, draws and illegal moves; 24 Points solver/verifier rounds; the adapter."""

import pytest

from rllib_llm.envs.multi_agent import Points24SolverVerifierEnv, TicTacToeEnv
from rllib_llm.envs.multi_agent.pettingzoo_adapter import ALL, PettingZooAdapter, make_multi_agent_env
from rllib_llm.envs.multi_agent.tictactoe import winner_mark


def play(env, moves):
    for move in moves:
        env.step(move)


@pytest.mark.parametrize(
    "moves, winner",
    [
        (["1", "4", "2", "5", "3"], "player_1"),  # X: top row
        (["1", "2", "4", "5", "9", "8"], "player_2"),  # O: middle column
        (["5", "1", "3", "2", "7"], "player_1"),  # X: anti-diagonal
    ],
)
def test_tictactoe_win_pays_winner_and_loser_and_ends(moves, winner):
    env = TicTacToeEnv()
    env.reset(seed=0)
    play(env, moves)
    loser = "player_2" if winner == "player_1" else "player_1"
    assert env.rewards == {winner: 1.0, loser: -1.0}
    assert all(env.terminations.values()) and not any(env.truncations.values())
    assert env.infos[winner]["won"] and not env.infos[loser]["won"]


def test_tictactoe_draw_pays_nothing():
    env = TicTacToeEnv()
    env.reset(seed=0)
    play(env, ["1", "2", "3", "5", "4", "6", "8", "7", "9"])
    assert winner_mark(env.board) is None
    assert env.rewards == {"player_1": 0.0, "player_2": 0.0} and all(env.terminations.values())
    assert not any(info["won"] for info in env.infos.values())


@pytest.mark.parametrize("bad", ["5", "0", "10", "the middle", None])
def test_tictactoe_illegal_move_is_an_invalid_noop_for_the_same_player(bad):
    env = TicTacToeEnv()
    env.reset(seed=0)
    env.step("5")  # X takes the centre; O to move
    board = list(env.board)
    env.step(bad)
    assert env.agent_selection == "player_2" and env.board == board
    assert env.infos["player_2"]["is_action_valid"] is False
    assert not any(env.terminations.values()) and env.rewards == {"player_1": 0.0, "player_2": 0.0}
    assert "illegal" in env.observe("player_2") or "not a cell number" in env.observe("player_2")
    env.step("1")
    assert env.infos["player_2"]["is_action_valid"] is True and env.agent_selection == "player_1"


def test_tictactoe_stalled_game_is_truncated_at_max_steps():
    env = TicTacToeEnv(max_steps=3)
    env.reset(seed=0)
    play(env, ["x", "x", "x"])
    assert all(env.truncations.values()) and not any(env.terminations.values())


def test_tictactoe_opening_moves_are_deterministic_in_the_seed():
    boards = {}
    for seed in (1, 2, 3, 1):
        env = TicTacToeEnv(opening_moves=2)
        env.reset(seed=seed)
        assert env.board.count("X") == env.board.count("O") == 1 and env.agent_selection == "player_1"
        boards.setdefault(seed, env.render())
        assert boards[seed] == env.render()
    assert len(set(boards.values())) > 1


def _solver_verifier(seed=3):
    env = Points24SolverVerifierEnv(max_rounds=2)
    env.reset(seed=seed)
    return env, env.game.solution()


def test_points24_correct_accepted_answer_pays_both():
    env, solution = _solver_verifier()
    env.step(solution)
    assert env.agent_selection == "verifier" and solution in env.observe("verifier")
    env.step("accept")
    assert env.rewards == {"solver": 1.0, "verifier": 1.0} and all(env.terminations.values())
    assert env.infos["solver"]["won"] and env.infos["verifier"]["won"]


def test_points24_wrong_accepted_answer_pays_nothing():
    env, _ = _solver_verifier()
    cards = env.game.values
    wrong = "+".join(map(str, cards))  # a formula over the cards, but the sum is not 24 for this hand
    assert sum(cards) != 24
    env.step(wrong)
    assert env.infos["solver"]["is_action_valid"]
    env.step("accept")
    assert env.rewards == {"solver": 0.0, "verifier": 0.0} and all(env.terminations.values())
    assert not env.infos["solver"]["won"]


def test_points24_rejection_sends_feedback_then_rounds_run_out():
    env, solution = _solver_verifier()
    env.step(solution)
    env.step("reject: please double-check 10/10")
    assert env.agent_selection == "solver"
    assert "rejected" in env.observe("solver") and "double-check 10/10" in env.observe("solver")
    env.step(solution)
    env.step("reject")
    assert all(env.truncations.values()) and env.rewards == {"solver": 0.0, "verifier": 0.0}


@pytest.mark.parametrize("bad", [None, "", "1+", "__import__('os').system('echo hi')", "10**10"])
def test_points24_malformed_formula_is_invalid_and_the_solver_retries(bad):
    env, _ = _solver_verifier()
    env.step(bad)
    assert env.agent_selection == "solver" and env.infos["solver"]["is_action_valid"] is False
    assert env.proposal is None


def test_points24_a_formula_over_other_numbers_goes_to_the_verifier_and_cannot_win():
    env = Points24SolverVerifierEnv(max_rounds=3)
    env.reset(seed=3)
    solution = env.game.solution()
    env.step("1+1")  # well-formed, not the cards: checking the cards is the verifier's job
    assert env.infos["solver"]["is_action_valid"] and env.agent_selection == "verifier"
    assert "The solver proposes: 1+1" in env.observe("verifier") and env.proposal_correct is False
    env.step("reject: it does not use the cards")
    assert env.agent_selection == "solver" and "does not use the cards" in env.observe("solver")
    env.step(solution)
    assert env.proposal_correct is True
    env.step("reject")  # the verifier wrongly rejects a correct formula ...
    env.step("1+1")  # ... which must not make the next, wrong-card proposal count as correct
    assert env.proposal_correct is False
    env.step("accept")
    assert env.rewards == {"solver": 0.0, "verifier": 0.0} and not env.infos["solver"]["won"]


def test_points24_verifier_must_accept_or_reject():
    env, solution = _solver_verifier()
    env.step(solution)
    env.step("looks fine to me")
    assert env.agent_selection == "verifier" and env.infos["verifier"]["is_action_valid"] is False
    assert "neither accept nor reject" in env.observe("verifier")


def test_aec_adapter_observations_follow_the_turn_and_end_with_everyone():
    adapter = PettingZooAdapter(make_multi_agent_env("TicTacToe"))
    observations, _ = adapter.reset(seed=0)
    assert list(observations) == ["player_1"] == adapter.agents_to_act()
    step = adapter.step({"player_1": "1"})
    assert list(step.observations) == ["player_2"] and not step.done
    assert set(step.rewards) == {"player_1", "player_2"}
    with pytest.raises(ValueError, match="player_2"):
        adapter.step({"player_1": "2"})
    for move in ["4", "2", "5"]:
        step = adapter.step({adapter.agents_to_act()[0]: move})
    step = adapter.step({"player_1": "3"})
    assert step.done and step.terminateds[ALL]
    assert set(step.observations) == {"player_1", "player_2"} and step.rewards == {"player_1": 1.0, "player_2": -1.0}
    assert adapter.agents_to_act() == []


def test_points24_card_match_reward_pays_the_solver_for_formulas_closer_to_the_cards():
    env = Points24SolverVerifierEnv(max_rounds=2, card_match_reward=0.2)
    env.reset(seed=3)
    a, b, c, d = env.game.values
    env.step(f"{a}+{b}+{c}")  # three of the four cards: proposed, for the verifier to reject
    assert env.agent_selection == "verifier" and env.infos["solver"]["is_action_valid"] is True
    assert env.rewards == {"solver": pytest.approx(0.15), "verifier": 0.0}
    env.step("reject: a card is missing")
    env.step("(((")  # no formula: nothing, and the solver tries again
    assert env.agent_selection == "solver" and env.infos["solver"]["is_action_valid"] is False
    assert env.rewards == {"solver": 0.0, "verifier": 0.0}
    env.step(env.game.solution())  # exactly the cards
    assert env.rewards == {"solver": pytest.approx(0.2), "verifier": 0.0} and env.agent_selection == "verifier"
    env.step("accept")
    assert env.rewards == {"solver": 1.0, "verifier": 1.0}
    # PettingZoo's running sum since the solver last acted: its proposal's shaping plus the team's success.
    assert env._cumulative_rewards["solver"] == pytest.approx(1.2)


def test_points24_shaping_on_the_truncating_step_is_kept():
    env = Points24SolverVerifierEnv(max_rounds=2, card_match_reward=0.5, max_steps=1)
    env.reset(seed=3)
    a, b, *_ = env.game.values
    env.step(f"{a}+{b}")
    assert all(env.truncations.values()) and env.rewards["solver"] == pytest.approx(0.25)


def test_points24_refuses_a_negative_card_match_reward():
    with pytest.raises(ValueError, match="card_match_reward"):
        Points24SolverVerifierEnv(card_match_reward=-1.0)


def test_points24_shaping_reaches_the_adapters_rewards():
    adapter = PettingZooAdapter(make_multi_agent_env("Points24SolverVerifier", {"card_match_reward": 0.2}))
    adapter.reset(seed=3)
    a, b, c, _ = adapter.env.game.values
    step = adapter.step({"solver": f"{a}+{b}+{c}"})
    assert step.rewards["solver"] == pytest.approx(0.15) and not step.done

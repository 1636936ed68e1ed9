"""The per-iteration progress table: single-agent columns, per-agent columns of multi-agent results, and
KL/entropy as the Learner modules' mean."""

from __future__ import annotations

import math

from rllib_llm.run.progress import COLUMNS, format_row, header, row_values, table_columns

SINGLE = {
    "training_iteration": 3,
    "env_runners": {"success_rate": 0.5, "valid_action_rate": 1.0, "episode_return_mean": 0.25},
    "learners": {"default_policy": {"kl": 0.01, "entropy": 1.5}, "__all_modules__": {"kl": 9.0}},
    "time_this_iter_s": 12.0,
}
MULTI = {
    "training_iteration": 1,
    "env_runners": {
        "success_rate": 0.75,
        "valid_action_rate": 0.5,
        "agent_solver": {"success_rate": 0.75, "valid_action_rate": 0.25, "episode_return_mean": 1.0},
        "agent_verifier": {"success_rate": 0.5, "valid_action_rate": 0.75, "episode_return_mean": -0.5},
    },
    "learners": {
        "solver": {"kl": 0.02, "entropy": 1.0},
        "verifier": {"kl": 0.04, "entropy": 3.0},
        "__all_modules__": {"entropy": 100.0},
    },
}


def test_single_agent_rows_keep_the_fixed_columns_and_read_default_policy():
    assert table_columns(SINGLE) == COLUMNS
    values = row_values(SINGLE)
    assert values["kl"] == 0.01 and values["entropy"] == 1.5  # not __all_modules__'s
    assert math.isnan(values["tok/s"])
    row = format_row(values)
    assert row.split()[:4] == ["3", "0.50", "1.00", "0.25"] and row.split()[-2:] == ["-", "12.0"]
    assert len(row) == len(header())


def test_multi_agent_rows_add_per_agent_columns_and_average_the_modules():
    columns = table_columns(MULTI)
    titles = [title for title, _, _ in columns]
    assert titles[len(COLUMNS):] == [
        "solver:success", "solver:valid", "solver:return", "verifier:success", "verifier:valid", "verifier:return",
    ]
    values = row_values(MULTI)
    assert values["verifier:return"] == -0.5 and values["solver:valid"] == 0.25
    assert math.isclose(values["kl"], 0.03) and values["entropy"] == 2.0
    head, row = header(columns), format_row(values, columns)
    assert head.split()[-1] == "verifier:ret" and row.split()[-6:] == ["0.75", "0.25", "1.00", "0.50", "0.75", "-0.50"]
    assert len(head) == len(row)


def test_a_later_result_missing_an_agent_prints_dashes_in_its_columns():
    columns = table_columns(MULTI)
    later = {**MULTI, "env_runners": {k: v for k, v in MULTI["env_runners"].items() if k != "agent_verifier"}}
    values = row_values(later)
    assert "verifier:success" not in values
    assert format_row(values, columns).split()[-3:] == ["-", "-", "-"]


def test_the_table_shows_the_share_of_groups_without_signal():
    from rllib_llm.run.progress import COLUMNS, format_row, header, row_values

    result = {"training_iteration": 3, "learners": {"uninformative_group_fraction": 0.75, "default_policy": {}}}
    values = row_values(result, COLUMNS)
    assert values["no_signal"] == 0.75
    assert "no_signal" in header(COLUMNS) and "0.75" in format_row(values, COLUMNS)


def test_a_two_player_table_prints_per_agent_columns_short_and_keeps_every_key_in_the_rows():
    from rllib_llm.run.progress import header_label, printed_columns

    result = {
        "training_iteration": 1,
        "env_runners": {
            "success_rate": 0.5,
            **{f"agent_player_{i}": {"success_rate": 0.5, "valid_action_rate": 1.0, "episode_return_mean": 0.0}
               for i in (1, 2)},
        },
    }
    columns = printed_columns(table_columns(result))
    titles = [title for title, _, _ in columns]
    assert "success" not in titles and "valid" not in titles and "return" not in titles
    assert "player_1:success" in titles and header_label("player_1:success") == "p1:succ"
    head, row = header(columns), format_row(row_values(result), columns)
    assert len(head) == len(row) <= 130  # was ~190 with full titles and the all-agent columns
    assert "p2:ret" in head.split()
    assert {"success", "player_2:return"} <= set(row_values(result))  # progress.jsonl keeps the full names
    assert printed_columns(COLUMNS) == COLUMNS  # single-agent tables unchanged


def test_an_asynchronous_run_adds_staleness_and_dropped_groups_before_the_timings():
    result = {**SINGLE, "async_rollouts": {"staleness_mean": 0.75, "groups_dropped": 2.0}}
    columns = table_columns(result)
    titles = [title for title, _, _ in columns]
    assert titles[-4:] == ["stale", "dropped", "tok/s", "time_s"] and table_columns(SINGLE) == COLUMNS
    row = format_row(row_values(result, columns), columns)
    assert row.split()[-4:] == ["0.75", "2", "-", "12.0"] and len(row) == len(header(columns))

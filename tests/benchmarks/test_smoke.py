"""Smoke tests: every benchmark at its very smallest size on the tiny model writes the rows it promises.

The benchmarks themselves are not part of the suite (they time things); these only check that each script
still runs end to end and that its JSON has the expected shape.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks._common import format_table, resolve_size

TINY = "tiny-random-llama"


def run_benchmark(name: str, tmp_path: Path, *argv: str) -> dict[str, Any]:
    """Runs ``benchmarks/<name>.py`` in-process, writing to ``tmp_path``; returns its JSON."""
    output = tmp_path / f"{name}.json"
    importlib.import_module(f"benchmarks.{name}").main([*argv, "--output", str(output)])
    results = json.loads(output.read_text())
    assert results["benchmark"] == name
    machine = results["machine"]
    assert {"date", "cores", "cpu", "torch", "load_avg"} <= set(machine)
    return results


def test_size_presets_and_numbers():
    presets = {"small": {"steps": 2, "tokens": 8}, "medium": {"steps": 4, "tokens": 16}}
    assert resolve_size("medium", presets, "steps") == {"steps": 4, "tokens": 16}
    assert resolve_size("7", presets, "steps") == {"steps": 7, "tokens": 8}
    for bad in ("huge", "0", "1.5"):
        with pytest.raises(SystemExit):
            resolve_size(bad, presets, "steps")


def test_table_formats_columns_and_missing_values():
    table = format_table([{"a": 1, "b": 0.12345}, {"a": 10, "b": None}], ["a", ("b", ".2f")])
    assert table.splitlines() == [" a     b", " 1  0.12", "10     -"]


def test_context_growth(tmp_path):
    results = run_benchmark("context_growth", tmp_path, "--model", TINY, "--size", "4", "--episodes", "2")
    rows = results["rows"]
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
    assert rows[0]["ratio"] == pytest.approx(1.0)
    assert all(r["full_history_tokens"] >= r["sliding_window_tokens"] for r in rows[1:])
    assert results["summary"]["ratio_at_last_step"] == rows[-1]["ratio"]
    assert (tmp_path / "context_growth.png").stat().st_size > 0


def test_rollout_throughput(tmp_path):
    results = run_benchmark("rollout_throughput", tmp_path, "--model", TINY, "--size", "1", "--envs", "1", "2")
    rows = results["rows"]
    assert [(r["envs"], r["mode"]) for r in rows] == [
        (1, "batched"),
        (1, "one_at_a_time"),
        (2, "batched"),
        (2, "one_at_a_time"),
    ]
    for row in rows:
        assert row["env_steps"] == row["envs"]  # one env step each
        assert row["generated_tokens"] == 8 * row["env_steps"]  # fixed-length responses
        assert row["generate_calls"] == (1 if row["mode"] == "batched" else row["envs"])
        assert row["env_steps_per_s"] > 0 and row["tokens_per_s"] > 0
        assert row["load_avg_1m"] is not None
    assert set(results["summary"]["speedup_by_envs"]) == {"1", "2"}


def test_learning(tmp_path, ray_session):  # ~12 s on 2 idle cores, plus Ray's start if no test started it
    results = run_benchmark("learning", tmp_path, "--model", TINY, "--size", "1", "--seeds", "0")
    rows = results["rows"]
    assert [(r["algo"], r["seed"], r["iteration"]) for r in rows] == [("gigpo", 0, 1), ("grpo", 0, 1)]
    assert [r["estimator"] for r in results["summary"]["runs"]] == ["gigpo", "grpo"]
    curves = results["summary"]["curves"]
    assert set(curves) == {"gigpo", "grpo"} and curves["gigpo"]["iteration"] == [1]
    # Success over the iteration's 2 x 2 episodes: a multiple of 1/4 (a per-step or NaN rate is not).
    assert all(r["success_rate"] * 4 == round(r["success_rate"] * 4) and r["wall_s"] > 0 for r in rows)
    assert (tmp_path / "learning.png").stat().st_size > 0


def test_learning_on_sokoban_replaces_the_main_jobs_env_config():
    from benchmarks.learning import SOKOBAN, sokoban
    from rllib_llm.run.cli import load_tuned_example

    config, _ = load_tuned_example("tuned_examples/numberline_gigpo.py")
    moved = sokoban(config)
    assert moved.env == "Sokoban" and moved.env_config == SOKOBAN  # no NumberLine keys left (max_position)
    moved.validate()


@pytest.mark.slow  # ~27 s on 2 idle cores: a fresh process imports torch and Ray and starts Ray
def test_memory_rss(tmp_path):
    results = run_benchmark("memory_rss", tmp_path, "--size", "1", "--group-sizes", "2")
    (row,) = results["rows"]
    assert row["group_size"] == 2 and row["episodes"] == 2 and row["env_steps"] > 0
    assert row["peak_mb"] >= row["after_build_mb"] >= row["after_imports_mb"] > 0

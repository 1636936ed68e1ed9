"""Stop criteria for ``rllib-llm train``: the ``stop`` dict of a tuned example, read as Ray Tune reads it.

A tuned example's ``stop = {"training_iteration": 16, "time_total_s": 600, "env_runners/success_rate": 0.9}``
means "train at most 16 iterations, and stop earlier once a result's value for any other key reaches its
threshold". Keys name result entries, nested dicts joined by ``/`` (Tune's convention), so the same dict
works with ``rllib-llm train`` and with ``tune.RunConfig(stop=...)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

ITERATIONS = "training_iteration"


def check_stop(stop: Mapping[str, Any]) -> dict[str, float]:
    """The stop dict with its thresholds as floats; a ValueError naming the key for anything else."""
    checked: dict[str, float] = {}
    for key, value in stop.items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"stop: keys must be result names like 'time_total_s', got {key!r}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
            raise ValueError(f"stop[{key!r}] must be a number, got {value!r}")
        if key == ITERATIONS and (value < 1 or value != int(value)):
            raise ValueError(f"stop[{key!r}] must be a whole number >= 1, got {value!r}")
        checked[key] = float(value)
    return checked


def result_value(result: Mapping[str, Any], key: str) -> Any:
    """``result[a][b]`` for the key ``"a/b"`` (a flat key containing ``/`` is looked up first); None if absent."""
    if key in result:
        return result[key]
    node: Any = result
    for part in key.split("/"):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


#: Stop keys that bound the run's length rather than say what it must learn (``--as-test`` ignores them).
BUDGET_KEYS = (ITERATIONS, "time_total_s")


def learning_criteria(stop: Mapping[str, float]) -> dict[str, float]:
    """The stop criteria a run reaches by learning (every key but :data:`BUDGET_KEYS`): what ``--as-test``
    requires, as RLlib's example scripts require ``--stop-reward``."""
    return {key: value for key, value in stop.items() if key not in BUDGET_KEYS}


def reached_criterion(stop: Mapping[str, float], result: Mapping[str, Any]) -> tuple[str, str] | None:
    """(the key, "<key> <value> >= <threshold>") of the first criterion ``result`` reaches, or None to go on.
    The iteration cap is the caller's loop bound, not checked here. A key missing from the result is a
    ValueError: a misspelt criterion would otherwise never stop the run."""
    for key, threshold in stop.items():
        if key == ITERATIONS:
            continue
        value = result_value(result, key)
        if value is None:
            top = ", ".join(sorted(result)[:20])
            raise ValueError(f"stop[{key!r}]: the results have no such entry (top-level entries: {top})")
        if isinstance(value, (int, float)) and not math.isnan(value) and value >= threshold:
            return key, f"{key} {value:.4g} >= {threshold:g}"
    return None

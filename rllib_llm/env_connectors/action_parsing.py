"""Pulling the action out of a model response: the text inside the last ``<action>...</action>`` pair."""

from __future__ import annotations

import re

_ACTION = re.compile(r"<action>(.*?)</action>", re.DOTALL | re.IGNORECASE)
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)


def parse_action(response: str) -> str | None:
    """The stripped text of the last ``<action>`` block, or None when there is none (or it is empty).

    Mirrors verl-agent's projections: a response with no closed action block is an invalid action.
    Non-UTF-8 bytes never reach here (the tokenizer decodes with replacement characters).
    """
    matches = _ACTION.findall(response)
    if not matches:
        return None
    action = matches[-1].strip()
    return action or None


def strip_think(response: str) -> str:
    """The response without ``<think>`` blocks (what memory keeps of an action)."""
    return _THINK.sub("", response).strip()

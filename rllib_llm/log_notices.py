"""Third-party log notices dropped where they are logged: one filter per logger, matching the start of the
message (never a whole library's level), so warnings that call for action still print. The CLI's notices
(:mod:`rllib_llm.run.quiet`) and the vLLM backend's (:mod:`rllib_llm.generation.vllm`) both install theirs here."""

from __future__ import annotations

import logging
from collections.abc import Mapping


class DropNotices(logging.Filter):
    """Drops the records whose message starts with one of ``starts``."""

    def __init__(self, starts: tuple[str, ...]) -> None:
        super().__init__()
        self.starts = starts

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(self.starts)


def drop_notices(notices: Mapping[str, tuple[str, ...]]) -> None:
    """For each logger name of ``notices``, drops the records starting with its message starts: one
    :class:`DropNotices` per logger, extended (not doubled) when called again."""
    for name, starts in notices.items():
        logger = logging.getLogger(name)
        installed = next((f for f in logger.filters if isinstance(f, DropNotices)), None)
        if installed is None:
            logger.addFilter(DropNotices(tuple(starts)))
        else:
            installed.starts += tuple(s for s in starts if s not in installed.starts)

"""One retry policy for the library's HTTP clients (retrieval/WebShop/AppWorld adapters, the prompt agent).

Transient failures are the statuses below plus timeouts and refused connections. Waits grow exponentially
with "equal jitter" so clients that failed together do not retry together, and a server's ``Retry-After``
(seconds) is honoured up to :data:`MAX_RETRY_AFTER`.
"""

from __future__ import annotations

import random
from typing import Any

#: HTTP statuses worth retrying: request timeout, conflict, rate limited, server errors.
RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
#: Longest server-requested wait (``Retry-After``) honoured, in seconds.
MAX_RETRY_AFTER = 300.0


def backoff_delay(attempt: int, base: float, cap: float, rng: random.Random) -> float:
    """``min(cap, base * 2**attempt)`` scaled by a jitter in [0.5, 1] ("equal jitter"): clients that
    failed together do not retry together."""
    return min(cap, base * 2**attempt) * (0.5 + 0.5 * rng.random())


def retry_after(headers: Any) -> float | None:
    """The ``Retry-After`` header in seconds, capped at :data:`MAX_RETRY_AFTER`; None when absent or an
    HTTP date (the caller then falls back to its backoff)."""
    try:
        value = headers.get("Retry-After") if headers is not None else None
        return min(MAX_RETRY_AFTER, max(0.0, float(value))) if value is not None else None
    except (TypeError, ValueError):
        return None

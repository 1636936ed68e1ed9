"""A small stdlib HTTP client for the env adapters that talk to servers (retrieval, WebShop, AppWorld).

Why stdlib: the envs must not drag in an HTTP stack. Connection failures, timeouts, 5xx answers and the
transient 4xx ones (408, 409, 429) are retried with jittered exponential backoff, honouring ``Retry-After``
(:mod:`rllib_llm.http.retry`); then :class:`ServerUnavailableError` says which server could not be reached and how
to start it. Other 4xx answers are not retried (:class:`ServerRequestError`). Requests go through
:mod:`rllib_llm.http.safety`: http(s) only, redirects and (with ``allowed_origin``) the URL itself on the server's
origin, answers capped at ``max_bytes``; a violation is a :class:`ServerRequestError` naming the URL.
"""

from __future__ import annotations

import json
import random
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from rllib_llm.http.retry import RETRY_STATUSES, backoff_delay, retry_after
from rllib_llm.http.safety import (
    DEFAULT_MAX_BYTES,
    ResponseTooLargeError,
    UnsafeURLError,
    check_url,
    open_and_read,
    safe_opener,
)

_RNG = random.Random()


class ServerUnavailableError(ConnectionError):
    """The server did not answer (refused, timed out, or kept failing with 5xx) after all retries."""


class ServerRequestError(RuntimeError):
    """The server answered the request with a client error (4xx): retrying would not help."""


def request(
    url: str,
    *,
    json_body: Any = None,
    form: dict[str, str] | None = None,
    timeout: float = 10.0,
    retries: int = 3,
    backoff: float = 0.5,
    backoff_max: float = 30.0,
    what: str = "server",
    hint: str = "",
    allowed_origin: str | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> tuple[bytes, str]:
    """GET ``url`` (or POST ``json_body``/``form``); returns (body, final url after redirects). Each attempt
    has ``timeout`` seconds in all (connect, send, headers and body: :func:`~rllib_llm.http.safety.open_and_read`).

    ``allowed_origin`` (default: ``url``'s own): the only scheme/host/port the request and its redirects may
    reach. Retry ``k`` (from 0) waits the server's ``Retry-After`` if it sent one, else ``backoff * 2**k`` capped
    at ``backoff_max`` and scaled by a jitter in [0.5, 1]."""
    try:
        check_url(url, allowed_origin)
    except UnsafeURLError as e:
        raise ServerRequestError(f"{what}: {e}") from None
    opener = safe_opener(allowed_origin or url)
    data, headers = None, {}
    if json_body is not None:
        data, headers = json.dumps(json_body).encode(), {"Content-Type": "application/json"}
    elif form is not None:
        data, headers = urllib.parse.urlencode(form).encode(), {"Content-Type": "application/x-www-form-urlencoded"}
    last: Exception | None = None
    delay: float | None = None
    for attempt in range(retries + 1):
        if attempt:
            time.sleep(delay if delay is not None else backoff_delay(attempt - 1, backoff, backoff_max, _RNG))
        delay = None
        req = urllib.request.Request(url, data=data, headers=headers, method="POST" if data is not None else "GET")
        try:
            return open_and_read(opener, req, timeout, max_bytes)
        except (UnsafeURLError, ResponseTooLargeError) as e:
            raise ServerRequestError(f"{what} at {url}: {e}") from None
        except urllib.error.HTTPError as e:
            body = (e.read().decode(errors="replace") if e.fp is not None else "")[:500] or str(e.reason)
            if e.code < 500 and e.code not in RETRY_STATUSES:
                raise ServerRequestError(f"{what} at {url} rejected the request ({e.code}): {body}") from None
            last, delay = e, retry_after(e.headers)
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as e:
            last = e
    raise ServerUnavailableError(
        f"Could not reach the {what} at {url} after {retries + 1} attempts ({last}). {hint}".strip()
    ) from last


def post_json(url: str, payload: Any, **kwargs: Any) -> Any:
    """POST ``payload`` as JSON and decode the JSON answer (see :func:`request` for the retry options)."""
    body, _ = request(url, json_body=payload, **kwargs)
    try:
        return json.loads(body)
    except json.JSONDecodeError as e:
        raise ServerRequestError(f"{kwargs.get('what', 'server')} at {url} sent invalid JSON: {body[:200]!r}") from e

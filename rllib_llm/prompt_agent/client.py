"""A small OpenAI-compatible chat client: timeout, retries with exponential backoff, a token-bucket limit.

Standard library only (``urllib``), so evaluating GPT-4o, a vLLM server (``vllm serve``) or Ray Serve LLM
needs no SDK: anything serving ``POST {base_url}/chat/completions`` works. Transient failures (timeouts,
connection errors, HTTP 408/409/429/5xx) are retried with exponential backoff and jitter, honouring a
``Retry-After`` header; other HTTP errors (a bad key, an unknown model) fail at once with the server's
message. The API key comes from an environment variable, never from a config file or the command line.
"""

from __future__ import annotations

import json
import logging
import os
import random
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rllib_llm.http.retry import RETRY_STATUSES, backoff_delay, retry_after
from rllib_llm.http.safety import DEFAULT_MAX_BYTES, ResponseTooLargeError, UnsafeURLError, open_and_read, safe_opener

logger = logging.getLogger(__name__)

class APIError(RuntimeError):
    """A request that failed for good (after retries, or at once for a non-transient status)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class RateLimiter:
    """Token bucket: ``rate`` requests per second on average, bursts of up to ``capacity``. Thread-safe.

    Each :meth:`acquire` takes a token, possibly going into debt, and sleeps until the debt is paid, so
    concurrent callers queue in arrival order without holding the lock while they sleep.
    """

    def __init__(
        self,
        rate: float,
        capacity: float = 1.0,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if rate <= 0 or capacity < 1:
            raise ValueError(f"rate must be > 0 and capacity >= 1, got rate={rate}, capacity={capacity}")
        self.rate, self.capacity = rate, capacity
        self._clock, self._sleep = clock, sleep
        self._tokens = capacity
        self._last = clock()
        self._lock = threading.Lock()

    def acquire(self) -> float:
        """Waits for a token; returns the seconds waited."""
        with self._lock:
            now = self._clock()
            self._tokens = min(self.capacity, self._tokens + (now - self._last) * self.rate)
            self._last = now
            self._tokens -= 1
            wait = max(0.0, -self._tokens / self.rate)
        if wait > 0:
            self._sleep(wait)
        return wait


@dataclass
class ChatResult:
    """One completion: the message text, the API's finish reason, token usage, attempts it took."""

    text: str
    finish_reason: str
    usage: dict[str, Any] = field(default_factory=dict)
    attempts: int = 1


class ChatClient:
    """``chat(messages) -> ChatResult`` against ``{base_url}/chat/completions``.

    Args:
        base_url: The API root, e.g. ``https://api.openai.com/v1`` or ``http://localhost:8000/v1``.
        model: The model name the server expects.
        api_key: The key; None reads ``api_key_env`` (no key is fine for local servers).
        timeout: Seconds per request (connect + read).
        max_retries: Retries after the first attempt for transient failures.
        backoff_base, backoff_max: Exponential backoff: ``base * 2**attempt`` seconds, capped.
        requests_per_minute: Token-bucket limit shared by all threads using this client (None: none).
        burst: Bucket capacity (requests that may go at once after a quiet spell).
        extra_body: Merged into every request body (``top_k``, vLLM's ``include_stop_str_in_output``...).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        timeout: float = 60.0,
        max_retries: int = 5,
        backoff_base: float = 1.0,
        backoff_max: float = 30.0,
        requests_per_minute: float | None = None,
        burst: float = 1.0,
        extra_body: dict[str, Any] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {base_url!r}")
        if max_retries < 0 or timeout <= 0:
            raise ValueError(f"max_retries must be >= 0 and timeout > 0, got {max_retries}, {timeout}")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff_base, self.backoff_max = backoff_base, backoff_max
        self.extra_body = dict(extra_body or {})
        key = api_key if api_key is not None else os.environ.get(api_key_env)
        self._headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
        self._sleep = sleep
        self._rng = rng or random.Random()
        self.limiter = RateLimiter(requests_per_minute / 60.0, burst, sleep=sleep) if requests_per_minute else None
        self._lock = threading.Lock()
        self._opener = safe_opener(strip_auth_across_origins=True)
        self.max_response_bytes = DEFAULT_MAX_BYTES
        #: Counters over the client's life: HTTP requests sent, retries, requests that failed for good.
        self.stats = {"requests": 0, "retries": 0, "failures": 0}

    def _count(self, key: str) -> None:
        with self._lock:
            self.stats[key] += 1

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        """One POST; redirects are followed to http(s) only, and the API key never travels to another host."""
        request = urllib.request.Request(self.url, data=json.dumps(body).encode(), headers=self._headers, method="POST")
        body, _ = open_and_read(self._opener, request, self.timeout, self.max_response_bytes)
        return json.loads(body.decode())

    def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        temperature: float | None = None,
        top_p: float | None = None,
        max_tokens: int | None = None,
        seed: int | None = None,
        stop: list[str] | None = None,
    ) -> ChatResult:
        """One chat completion, retried on transient failures; raises :class:`APIError` otherwise."""
        options = {"temperature": temperature, "top_p": top_p, "max_tokens": max_tokens, "seed": seed, "stop": stop}
        body = {"model": self.model, "messages": messages, **{k: v for k, v in options.items() if v is not None}}
        body.update(self.extra_body)
        for attempt in range(self.max_retries + 1):
            if self.limiter is not None:
                self.limiter.acquire()
            self._count("requests")
            delay: float | None = None
            try:
                data = self._post(body)
            except urllib.error.HTTPError as e:
                detail = e.read().decode(errors="replace")[:300] if e.fp is not None else ""
                error = APIError(f"HTTP {e.code} from {self.url}: {detail or e.reason}", e.code)
                if e.code not in RETRY_STATUSES:
                    self._count("failures")
                    raise error from e
                delay = retry_after(e.headers)
            except (UnsafeURLError, ResponseTooLargeError) as e:  # not transient: retrying would not help
                self._count("failures")
                raise APIError(f"{self.url}: {e}") from e
            except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
                error = APIError(f"{type(e).__name__} calling {self.url}: {getattr(e, 'reason', e)}")
            else:
                try:
                    choice = data["choices"][0]
                    text = choice["message"].get("content") or ""
                except (KeyError, IndexError, TypeError, AttributeError) as e:
                    self._count("failures")
                    raise APIError(f"Unexpected response from {self.url}: {str(data)[:300]}") from e
                return ChatResult(text, choice.get("finish_reason") or "stop", data.get("usage") or {}, attempt + 1)
            if attempt == self.max_retries:
                self._count("failures")
                raise APIError(f"{error} (gave up after {attempt + 1} attempts)", error.status) from error
            if delay is None:
                delay = backoff_delay(attempt, self.backoff_base, self.backoff_max, self._rng)
            logger.info("Retrying in %.2f s after %s", delay, error)
            self._count("retries")
            self._sleep(delay)
        raise AssertionError("unreachable")

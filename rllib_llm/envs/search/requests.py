"""What POST /retrieve accepts: the request limits and the parser the Serve deployment runs before any
retrieval work (a module of its own, free of Ray Serve and FastAPI, so it is tested without them)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

#: Request limits of POST /retrieve: a larger body is a 413, more queries or a longer query a 422 (a client
#: sending 1,000,000 queries in 9 MB held a replica for 86 s and 2 GB before these).
MAX_BODY_BYTES = 1024 * 1024
MAX_QUERIES = 512
MAX_QUERY_CHARS = 2000
MAX_TOPK = 50


class RejectedRequest(ValueError):
    """A /retrieve request refused with ``status`` (413 or 422) and a reason."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


def check_body_size(size: str | int | None) -> None:
    """:class:`RejectedRequest` (413) for a body over :data:`MAX_BODY_BYTES`: a Content-Length header (checked
    before the body is read) or the length of the body read."""
    if size is not None and str(size).isdigit() and int(size) > MAX_BODY_BYTES:
        raise RejectedRequest(413, f"request body over {MAX_BODY_BYTES} bytes")


async def read_body_capped(chunks: AsyncIterator[bytes], limit: int = MAX_BODY_BYTES) -> bytes:
    """The request body from its stream of chunks, refused (413) as soon as it passes ``limit``: a chunked
    body has no Content-Length to check first, and reading it whole before checking let a 1 GB upload take
    1 GB of the replica's memory (kept) and 21 s."""
    parts, size = [], 0
    async for chunk in chunks:
        size += len(chunk)
        if size > limit:
            raise RejectedRequest(413, f"request body over {limit} bytes")
        parts.append(chunk)
    return b"".join(parts)


def parse_retrieve_request(body: bytes, content_length: str | None = None) -> tuple[list[str], int]:
    """(queries, topk) of a /retrieve body, or :class:`RejectedRequest` saying why not (checked before any
    retrieval work: size first, from the Content-Length header when there is one)."""
    check_body_size(content_length)
    check_body_size(len(body))
    try:
        payload = json.loads(body)
        queries, topk = payload["queries"], int(payload.get("topk", 3))
    except Exception as e:  # a malformed request gets a 422 with the reason, not a 500
        raise RejectedRequest(422, f"bad request: {type(e).__name__}: {e}") from None
    if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
        raise RejectedRequest(422, "bad request: queries must be a list of strings")
    if len(queries) > MAX_QUERIES:
        raise RejectedRequest(422, f"bad request: {len(queries)} queries, at most {MAX_QUERIES} per request")
    if any(len(q) > MAX_QUERY_CHARS for q in queries):
        raise RejectedRequest(422, f"bad request: a query over {MAX_QUERY_CHARS} characters")
    return queries, max(1, min(topk, MAX_TOPK))

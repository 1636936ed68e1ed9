"""A retrieval server under Ray Serve, speaking Search-R1's API (POST /retrieve, GET /health).

``serve_retriever()`` starts (or joins) Ray, starts Serve's HTTP proxy bound to ``host`` (loopback by
default) and deploys one replica that builds its retriever from ``retriever_factory`` (BM25 over the shipped
corpus by default; pass e.g. ``lambda: DenseRetriever(my_encoder, load_corpus(path))`` for dense search).
Needs ``pip install "ray[serve]"``; imported lazily so the env works without it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from rllib_llm.envs.search.retrievers import BM25Retriever, Retriever

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


def _default_factory() -> Retriever:
    return BM25Retriever()


def _import_serve() -> tuple[Any, Any]:
    try:
        import fastapi  # noqa: F401
        import ray
        from ray import serve
    except ImportError as e:
        raise ImportError(f'serve_retriever needs Ray Serve: pip install "ray[serve]" ({e})') from e
    return ray, serve


def build_app(retriever_factory: Callable[[], Retriever], num_cpus: float = 0.5) -> Any:
    """The Serve application (a bound deployment) serving ``retriever_factory()``."""
    _import_serve()
    from rllib_llm.envs.search._serve_app import RetrieverServer

    return RetrieverServer.options(ray_actor_options={"num_cpus": num_cpus}).bind(retriever_factory)


def serve_retriever(
    retriever_factory: Callable[[], Retriever] | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    name: str = "retriever",
    route_prefix: str = "/",
    num_cpus: float = 0.5,
    ray_init_kwargs: dict[str, Any] | None = None,
) -> str:
    """Deploys the retriever under Ray Serve and returns its base URL (e.g. ``http://127.0.0.1:8000``)."""
    ray, serve = _import_serve()
    if not ray.is_initialized():
        ray.init(**{"include_dashboard": False, "log_to_driver": False, **(ray_init_kwargs or {})})
    serve.start(http_options={"host": host, "port": port})
    serve.run(build_app(retriever_factory or _default_factory, num_cpus=num_cpus), name=name, route_prefix=route_prefix)
    return f"http://{host}:{port}{route_prefix.rstrip('/')}"


def shutdown_retriever(name: str = "retriever", shutdown_serve: bool = True) -> None:
    """Deletes the app (and stops Serve, by default)."""
    _, serve = _import_serve()
    serve.delete(name)
    if shutdown_serve:
        serve.shutdown()

"""A retrieval server under Ray Serve, speaking Search-R1's API (POST /retrieve, GET /health).

``serve_retriever()`` starts (or joins) Ray, starts Serve's HTTP proxy bound to ``host`` (loopback by
default) and deploys one replica that builds its retriever from ``retriever_factory`` (BM25 over the shipped
corpus by default; pass e.g. ``lambda: DenseRetriever(my_encoder, load_corpus(path))`` for dense search).
Needs ``pip install "ray[serve]"``; imported lazily so the env works without it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rllib_llm.envs.search.retrievers import BM25Retriever, Retriever


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

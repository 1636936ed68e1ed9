"""The Ray Serve deployment behind :func:`rllib_llm.envs.search.server.serve_retriever`.

A module of its own (imported lazily) because it needs fastapi and Ray Serve at import time, and FastAPI
must be able to resolve the route annotations at module level.
"""

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from ray import serve
from starlette.requests import Request
from starlette.responses import JSONResponse

from rllib_llm.envs.search.requests import RejectedRequest, check_body_size, parse_retrieve_request, read_body_capped
from rllib_llm.envs.search.retrievers import Retriever

api = FastAPI(title="rllib-llm retriever")


def _entry(hit: dict) -> dict:
    doc = {"id": hit["id"], "title": hit["title"], "text": hit["text"], "contents": f'"{hit["title"]}"\n{hit["text"]}'}
    return {"document": doc, "score": hit["score"]}


@serve.deployment
@serve.ingress(api)
class RetrieverServer:
    def __init__(self, factory: Callable[[], Retriever]) -> None:
        self.retriever = factory()

    @api.get("/health")
    def health(self) -> dict:
        return {"status": "ok"}

    @api.post("/retrieve", response_model=None)
    async def retrieve(self, request: Request) -> Any:
        try:
            check_body_size(request.headers.get("content-length"))  # before reading the body
            queries, topk = parse_retrieve_request(await read_body_capped(request.stream()))
        except RejectedRequest as e:
            return JSONResponse({"error": str(e)}, status_code=e.status)
        rows = self.retriever.retrieve(queries, topk)
        return {"result": [[_entry(h) for h in row] for row in rows]}

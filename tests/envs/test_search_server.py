"""The retrieval server under Ray Serve, on loopback (slow: starting Ray and Serve takes ~40 s on 2 cores)."""

from __future__ import annotations

import pytest

from rllib_llm.envs.http_client import ServerRequestError, post_json
from rllib_llm.envs.search import SearchEnv
from tests.envs.conftest import check_step
from tests.envs.fake_http import free_port


def chunked_upload_status(url: str, megabytes: int) -> int:
    """POST /retrieve with a chunked body of ``megabytes`` MiB (no Content-Length); the answer's status."""
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    body = (b"x" * (1 << 20) for _ in range(megabytes))
    try:
        connection.request("POST", "/retrieve", body=body, headers={"Content-Type": "application/json"},
                           encode_chunked=True)  # fmt: skip
        return connection.getresponse().status
    except (BrokenPipeError, ConnectionResetError):  # the server answered 413 and closed mid-upload
        return 413
    finally:
        connection.close()


@pytest.mark.slow
def test_ray_serve_retriever_end_to_end(ray_session: None) -> None:
    pytest.importorskip("ray.serve")
    pytest.importorskip("fastapi")
    from rllib_llm.envs.search import serve_retriever, shutdown_retriever

    url = serve_retriever(port=free_port())
    try:
        assert url.startswith("http://127.0.0.1:")
        env = SearchEnv(retriever=url, topk=2)
        env.reset(options={"question": "Where was Albert Einstein born?", "answers": ["Ulm"]})
        obs, *_ = check_step(env.step("<search>Albert Einstein born</search>"), valid=True)
        assert obs.startswith("<information>Doc 1(Title: Albert Einstein)") and obs.count("Doc ") == 2
        _, r, term, _, info = check_step(env.step("<answer>Ulm</answer>"), valid=True)
        assert r == 1.0 and term and info["won"]
        raw = post_json(f"{url}/retrieve", {"queries": ["Danube"], "topk": 1})
        assert raw["result"][0][0]["document"]["contents"].startswith('"Danube"\n')
        with pytest.raises(ServerRequestError, match="422"):
            post_json(f"{url}/retrieve", {"queries": "not a list"}, retries=0)
        with pytest.raises(ServerRequestError, match="413"):  # ~2 MB of queries: refused, not searched
            post_json(f"{url}/retrieve", {"queries": ["q"] * 300_000}, retries=0)
        with pytest.raises(ServerRequestError, match="422"):
            post_json(f"{url}/retrieve", {"queries": ["q"] * 10_000}, retries=0)
        assert chunked_upload_status(url, megabytes=8) == 413  # no Content-Length: refused from the stream
    finally:
        shutdown_retriever()

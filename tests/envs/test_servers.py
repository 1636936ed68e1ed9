"""Env servers: loopback by default, timeouts on a server that accepts but never answers, exponential
backoff, a dead server reported in one line naming it; and (slow) a load burst against the retrieval server."""

from __future__ import annotations

import inspect
import json
import random
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rllib_llm.envs import http_client
from rllib_llm.envs.appworld.client import AppWorldClient
from rllib_llm.envs.http_client import ServerRequestError, ServerUnavailableError
from rllib_llm.envs.search import RetrieverClient, serve_retriever
from tests.envs.fake_http import FakeServer

ROOT = Path(__file__).resolve().parents[2]


class SilentServer:
    """Accepts TCP connections on 127.0.0.1 and never answers (a hung server process)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.accepted: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                self.accepted.append(self.sock.accept()[0])
            except OSError:
                return

    def close(self) -> None:
        for conn in self.accepted:
            conn.close()
        self.sock.close()


def test_servers_and_clients_default_to_loopback():
    assert inspect.signature(serve_retriever).parameters["host"].default == "127.0.0.1"
    assert AppWorldClient().url.startswith("http://127.0.0.1:")


@pytest.mark.parametrize(
    "call",
    [
        lambda url: RetrieverClient(url, timeout=0.3, retries=1, backoff=0.05).retrieve(["x"], 1),
        lambda url: AppWorldClient(url, timeout=0.3, retries=1, backoff=0.05).initialize("task"),
    ],
    ids=["retriever", "appworld"],
)
def test_a_hung_server_times_out_and_is_reported_by_name(call):
    server = SilentServer()
    try:
        start = time.perf_counter()
        with pytest.raises(ServerUnavailableError) as error:
            call(server.url)
        elapsed = time.perf_counter() - start
    finally:
        server.close()
    assert 0.6 <= elapsed < 10  # two attempts of 0.3 s each, not a hang
    message = str(error.value)
    assert server.url in message and "after 2 attempts" in message and "\n" not in message


class _FixedJitter(random.Random):
    """random() always 1.0: the jitter factor is then exactly 1 and the waits are the bare backoff."""

    def random(self) -> float:
        return 1.0


def _timed_handler(answers):
    """A handler replaying ``answers`` (status, payload[, headers]) in order, recording when each came."""
    times: list[float] = []

    def handler(method, path, body):
        times.append(time.perf_counter())
        return answers[min(len(times), len(answers)) - 1]

    return handler, times


HIT = (200, {"result": [[{"document": {"id": "1", "title": "T", "text": "x"}, "score": 1.0}]]})


def test_retries_back_off_exponentially(monkeypatch):
    monkeypatch.setattr(http_client, "_RNG", _FixedJitter())
    handler, times = _timed_handler([(503, {"error": "busy"})] * 3 + [HIT])
    with FakeServer(handler) as server:
        hits = RetrieverClient(server.url, retries=3, backoff=0.1).retrieve(["x"], 1)
    assert hits[0][0]["title"] == "T"
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert len(gaps) == 3 and gaps[0] >= 0.1 and gaps[1] >= 0.2 and gaps[2] >= 0.4


def test_rate_limited_answers_are_retried_after_the_servers_retry_after():
    handler, times = _timed_handler([(429, {"error": "slow down"}, {"Retry-After": "0.4"}), (429, {}), HIT])
    with FakeServer(handler) as server:
        hits = RetrieverClient(server.url, retries=2, backoff=0.01).retrieve(["x"], 1)
    assert hits[0][0]["title"] == "T" and len(times) == 3
    assert times[1] - times[0] >= 0.4  # the server's wait, not our 0.01 s backoff
    assert times[2] - times[1] < 0.3  # no Retry-After: back to the (jittered) 0.01 s backoff


def test_a_client_error_is_not_retried_and_names_the_status():
    handler, times = _timed_handler([(404, {"error": "no such index"})])
    with FakeServer(handler) as server, pytest.raises(ServerRequestError, match="404"):
        RetrieverClient(server.url, retries=3, backoff=0.01).retrieve(["x"], 1)
    assert len(times) == 1


@pytest.mark.slow
def test_retrieval_server_load_burst_from_a_second_process(tmp_path):
    pytest.importorskip("ray.serve")
    pytest.importorskip("fastapi")
    output = tmp_path / "retrieval_load.json"
    done = subprocess.run(
        [sys.executable, "benchmarks/retrieval_load.py", "--size", "small", "--output", str(output)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    row = json.loads(output.read_text())["rows"][0]
    assert row["requests"] == 200 and row["concurrency"] == 8
    assert row["errors"] == 0, row["error_examples"]
    assert 0 < row["p50_ms"] <= row["p95_ms"] <= row["p99_ms"] <= row["max_ms"]
    assert row["listening_on"] == ["127.0.0.1"]
    assert "p99_ms" in done.stdout

"""A local OpenAI-compatible chat server for tests (127.0.0.1, a free port): a NumberLine oracle.

It answers ``POST /v1/chat/completions`` by reading the last "Target T, position P." in the last user
message and moving toward the target, so a correct prompt -> request -> parse -> env loop scores 1.0.
``faults`` are (status, headers) answered before any success (to exercise retries); ``delays`` are
seconds to sleep before answering the first requests (to exercise timeouts). Every request is recorded.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_STATE = re.compile(r"Target (\d+), position (\d+)\.")


def oracle_reply(messages: list[dict[str, Any]]) -> str:
    user = next(m for m in reversed(messages) if m["role"] == "user")
    content = user["content"] if isinstance(user["content"], str) else " ".join(p.get("text", "") for p in user["content"])
    states = _STATE.findall(content)
    if not states:
        return "I do not know."
    target, position = (int(v) for v in states[-1])
    return f"<think>target {target}, at {position}</think><action>{'+' if target > position else '-'}</action> extra"


class FakeChatServer:
    def __init__(self, faults: list[tuple[int, dict]] | None = None, delays: list[float] | None = None) -> None:
        self.faults = list(faults or [])
        self.delays = list(delays or [])
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    server.requests.append({"path": self.path, "body": body, "headers": dict(self.headers)})
                    fault = server.faults.pop(0) if server.faults else None
                    delay = server.delays.pop(0) if server.delays else 0.0
                if delay:
                    time.sleep(delay)
                if self.path != "/v1/chat/completions":
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                if fault is not None:
                    return self._send(fault[0], {"error": {"message": "injected fault"}}, fault[1])
                text = oracle_reply(body["messages"])
                self._send(200, {
                    "id": "chatcmpl-test", "object": "chat.completion", "model": body["model"],
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                })

            def _send(self, status: int, payload: dict, headers: dict | None = None) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    for key, value in (headers or {}).items():
                        self.send_header(key, value)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FakeChatServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

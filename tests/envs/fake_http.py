"""A loopback JSON/HTML test server (stdlib http.server in a thread) for the adapters' HTTP tests."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# handler(method, path, body) -> (status, payload) or (status, payload, headers); dict/list payloads are sent
# as JSON, str as HTML (for a 3xx status the str is the Location to redirect to).
Handler = Callable[[str, str, bytes], tuple[Any, ...]]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class FakeServer:
    """Serves ``handler`` on 127.0.0.1:<free port> while used as a context manager; records requests."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[tuple[str, str, bytes]] = []
        outer = self

        class _H(BaseHTTPRequestHandler):
            def _serve(self, method: str) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.requests.append((method, self.path, body))
                status, payload, *extra = outer.handler(method, self.path, body)
                headers: dict[str, str] = extra[0] if extra else {}
                if 300 <= status < 400:
                    self.send_response(status)
                    self.send_header("Location", payload)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if isinstance(payload, str):
                    data, ctype = payload.encode(), "text/html; charset=utf-8"
                else:
                    data, ctype = json.dumps(payload).encode(), "application/json"
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), _H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)

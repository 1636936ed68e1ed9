"""Hostile servers: links and redirects to files or other hosts, credentials across a redirect, huge answers."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from rllib_llm.envs.http_client import ServerRequestError, request
from rllib_llm.http.safety import UnsafeURLError, check_url
from rllib_llm.prompt_agent.client import APIError, ChatClient

SECRET = "content of a local file"


class Server:
    """127.0.0.1:<free port>; ``routes[path] = (status, headers, body)``; records each request's headers."""

    def __init__(self, routes: dict[str, tuple[int, dict[str, str], bytes]]) -> None:
        self.routes, self.seen = routes, []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.seen.append((self.command, self.path, dict(self.headers)))
                status, headers, body = outer.routes.get(self.path, (404, {}, b"{}"))
                self.send_response(status)
                for name, value in {"Content-Length": str(len(body)), **headers}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _serve

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def secret_file(tmp_path):
    path = tmp_path / "secret.txt"
    path.write_text(SECRET)
    return path


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://127.0.0.1/x", "data:text/plain,hi", "http:///nohost"])
def test_only_http_urls_with_a_host_are_requested(url):
    with pytest.raises(ServerRequestError, match="only http:// and https://"):
        request(url, retries=0)


def test_a_redirect_to_a_local_file_is_refused_and_never_read(secret_file):
    server = Server({"/page": (302, {"Location": secret_file.as_uri()}, b"")})
    try:
        with pytest.raises(ServerRequestError) as info:
            request(server.url + "/page", retries=0)
        assert "not allowed" in str(info.value) and SECRET not in str(info.value)
    finally:
        server.close()


def test_env_clients_stay_on_their_server():
    other = Server({"/x": (200, {}, b"{}")})
    server = Server({"/page": (302, {"Location": other.url + "/x"}, b"")})
    try:
        with pytest.raises(ServerRequestError, match="not on the server"):
            request(server.url + "/page", retries=0)
        with pytest.raises(ServerRequestError, match="not on the server"):  # a link that leaves the server
            request(other.url + "/x", retries=0, allowed_origin=server.url)
        assert other.seen == []
    finally:
        server.close()
        other.close()


def test_a_webshop_page_linking_a_local_file_does_not_put_it_in_the_observation(secret_file):
    from rllib_llm.envs.webshop.server import WebShopServer

    page = f'<html><body><a class="product-link" href="{secret_file.as_uri()}">B0SECRET</a></body></html>'.encode()
    server = Server({"/fixed_0": (200, {"Content-Type": "text/html"}, page)})
    try:
        shop = WebShopServer(server.url, retries=0)
        first = shop.start({"goal_idx": 0})
        assert first.clickables, "the page's link is offered as an action"
        with pytest.raises(ServerRequestError, match="refusing"):
            shop.click(first.clickables[0])
    finally:
        server.close()


def test_answers_over_the_cap_are_refused():
    server = Server({"/big": (200, {}, b"x" * 5000)})
    try:
        with pytest.raises(ServerRequestError, match="cap"):
            request(server.url + "/big", retries=0, max_bytes=4096)
        assert len(request(server.url + "/big", retries=0, max_bytes=5000)[0]) == 5000
    finally:
        server.close()


def test_the_chat_client_never_sends_its_key_to_another_host():
    answer = b'{"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]}'
    elsewhere = Server({"/v1/chat/completions": (200, {"Content-Type": "application/json"}, answer)})
    api = Server({"/v1/chat/completions": (302, {"Location": elsewhere.url + "/v1/chat/completions"}, b"")})
    try:
        client = ChatClient(api.url + "/v1", "m", api_key="sk-secret", max_retries=0)
        assert client.chat([{"role": "user", "content": "hi"}]).text == "ok"
        assert api.seen[0][2].get("Authorization") == "Bearer sk-secret"
        assert [h.get("Authorization") for _, _, h in elsewhere.seen] == [None]
    finally:
        api.close()
        elsewhere.close()


def test_the_chat_client_refuses_a_redirect_to_a_file_and_a_huge_answer(secret_file):
    api = Server({"/v1/chat/completions": (302, {"Location": secret_file.as_uri()}, b"")})
    try:
        with pytest.raises(APIError, match="is not allowed") as info:
            ChatClient(api.url + "/v1", "m", max_retries=3).chat([{"role": "user", "content": "hi"}])
        assert SECRET not in str(info.value)
        assert len(api.seen) == 1  # not retried
        api.routes["/v1/chat/completions"] = (200, {}, b"{" + b" " * 10_000 + b"}")
        client = ChatClient(api.url + "/v1", "m", max_retries=0)
        client.max_response_bytes = 1000
        with pytest.raises(APIError, match="cap"):
            client.chat([{"role": "user", "content": "hi"}])
    finally:
        api.close()


def test_check_url_compares_scheme_host_and_port():
    assert check_url("http://a:80/x", "http://a/") == "http://a:80/x"
    for bad in ("https://a/x", "http://b/x", "http://a:81/x"):
        with pytest.raises(UnsafeURLError):
            check_url(bad, "http://a")


class Dripper:
    """A raw loopback peer that answers every connection one byte every ``every`` seconds: the status line
    and headers (``headers=True``) or, after prompt headers, a chunked body that never ends."""

    def __init__(self, headers: bool, every: float = 0.1) -> None:
        import socket

        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.headers, self.every, self.stop = headers, every, threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._drip, args=(conn,), daemon=True).start()

    def _drip(self, conn) -> None:
        import time

        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        try:
            conn.recv(65536)
            if not self.headers:
                conn.sendall(head)
                head = b""
            for byte in (head + b"1\r\n \r\n" * 100_000):
                if self.stop.is_set():
                    break
                conn.sendall(bytes([byte]))
                time.sleep(self.every)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.listener.close()


@pytest.mark.parametrize("headers", [True, False], ids=["dripped-headers", "dripped-chunked-body"])
def test_a_dripping_server_cannot_hold_a_client_past_its_timeout(headers):
    """Each byte arrives well within the socket timeout, so only a whole-request deadline ends the request
    (before: 25 s held with ``timeout=2``). Env client and chat client alike, retries included."""
    import time

    peer = Dripper(headers)
    try:
        start = time.monotonic()
        with pytest.raises(ConnectionError, match="within 1 s"):
            request(peer.url + "/x", timeout=1.0, retries=1, backoff=0.0)
        assert time.monotonic() - start < 4  # two attempts of 1 s, and the shutdown's slack
        start = time.monotonic()
        with pytest.raises(APIError, match="within 1 s"):
            ChatClient(peer.url + "/v1", "m", timeout=1.0, max_retries=0).chat([{"role": "user", "content": "hi"}])
        assert time.monotonic() - start < 3
    finally:
        peer.close()


def test_a_quick_answer_is_untouched_by_the_deadline():
    api = Server({"/ok": (200, {}, b'{"fine": true}')})
    try:
        assert request(api.url + "/ok", timeout=5.0)[0] == b'{"fine": true}'
    finally:
        api.close()

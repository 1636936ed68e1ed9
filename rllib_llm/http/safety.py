"""What every HTTP client of rllib-llm holds to: http(s) only, the origin it was given, capped answers.

Why: env servers (WebShop, AppWorld, retrieval) and chat APIs are other people's processes. A page whose
link points at ``file:///etc/passwd`` or at another host must not make the env read it into an observation
(and so into prompts, trajectories and MLflow artifacts); a redirect to another host must not carry the API
key along; an endless or huge answer must not fill the memory. One opener does all three for ``urllib``:

- :func:`check_url`: http/https only, and (with ``origin``) the same scheme, host and port as ``origin``.
- :func:`safe_opener`: redirects are held to the same rules (a redirect to another origin is refused, or with
  ``strip_auth_across_origins`` followed without the ``Authorization`` header, as ``requests`` does).
- :func:`read_capped`: reads at most ``max_bytes`` of an answer, else :class:`ResponseTooLargeError`.
- :func:`open_and_read`: the whole request (connect, send, headers, body) within one deadline: a socket
  timeout bounds each read only, so a server that drips a byte a second held a client with ``timeout=2`` for
  25 s; a watchdog now shuts the request's socket down when the deadline passes.
"""

from __future__ import annotations

import http.client
import socket
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

#: The largest answer a client reads by default (a WebShop page is ~50 kB, a chat completion less).
DEFAULT_MAX_BYTES = 8 * 1024 * 1024
SCHEMES = ("http", "https")
#: Headers that never follow a redirect to another origin.
CREDENTIAL_HEADERS = ("authorization", "cookie", "proxy-authorization")


class UnsafeURLError(ValueError):
    """A URL (or a redirect) to another scheme or origin than the client may talk to."""


class ResponseTooLargeError(ValueError):
    """An answer longer than the client's cap."""


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, lowercase host, port with the scheme's default filled in)."""
    parts = urllib.parse.urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme.lower())
    return parts.scheme.lower(), (parts.hostname or "").lower(), port


def check_url(url: str, allowed_origin: str | None = None) -> str:
    """``url`` if it is http(s) (and on ``allowed_origin``'s scheme, host and port, when given)."""
    scheme, host, _ = origin(url)
    if scheme not in SCHEMES or not host:
        raise UnsafeURLError(f"refusing {url!r}: only http:// and https:// URLs with a host are allowed")
    if allowed_origin is not None and origin(url) != origin(allowed_origin):
        raise UnsafeURLError(f"refusing {url!r}: not on the server this client was given ({allowed_origin})")
    return url


class _SafeRedirects(urllib.request.HTTPRedirectHandler):
    def __init__(self, allowed_origin: str | None, strip_auth_across_origins: bool) -> None:
        self.allowed_origin = allowed_origin
        self.strip_auth = strip_auth_across_origins

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> Any:
        newurl = urllib.parse.urljoin(req.full_url, newurl)
        same_origin = origin(newurl) == origin(req.full_url)
        check_url(newurl, None if self.strip_auth and not same_origin else self.allowed_origin)
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and not same_origin:
            for headers_of_request in (new.headers, new.unredirected_hdrs):
                for name in [n for n in headers_of_request if n.lower() in CREDENTIAL_HEADERS]:
                    del headers_of_request[name]
        return new


def safe_opener(allowed_origin: str | None = None, strip_auth_across_origins: bool = False) -> urllib.request.OpenerDirector:
    """An opener for http(s) only: no ``file:``/``ftp:``/``data:`` handlers at all, redirects checked by
    :func:`check_url` (``allowed_origin``: refused elsewhere; ``strip_auth_across_origins``: followed to any
    http(s) origin, credentials dropped)."""
    opener = urllib.request.OpenerDirector()
    for handler in (
        urllib.request.ProxyHandler(),
        _WatchedHTTPHandler(),
        _WatchedHTTPSHandler(),
        urllib.request.HTTPDefaultErrorHandler(),
        urllib.request.HTTPErrorProcessor(),
        _SafeRedirects(allowed_origin, strip_auth_across_origins),
    ):
        opener.add_handler(handler)
    return opener


def read_capped(response: Any, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """The answer's body, refusing one over ``max_bytes`` (its Content-Length, or what was actually sent)."""
    length = response.headers.get("Content-Length") if getattr(response, "headers", None) else None
    if length is not None and length.isdigit() and int(length) > max_bytes:
        raise ResponseTooLargeError(f"answer from {response.geturl()} is {int(length)} bytes, over the {max_bytes} cap")
    body = response.read(max_bytes + 1)
    if len(body) > max_bytes:
        raise ResponseTooLargeError(f"answer from {response.geturl()} is over the {max_bytes}-byte cap")
    return body


#: The sockets the current thread's request opened (set by :func:`open_and_read` around one request).
_WATCHED = threading.local()


def _watched(connection_class: type) -> Any:
    """A factory for ``connection_class`` whose connections report their socket to the current request's
    watchdog (:func:`open_and_read`) once connected."""

    def factory(host: str, **kwargs: Any) -> http.client.HTTPConnection:
        connection = connection_class(host, **kwargs)
        connect = connection.connect

        def connect_and_report() -> None:
            connect()
            sockets = getattr(_WATCHED, "sockets", None)
            if sockets is not None:
                sockets.append(connection.sock)

        connection.connect = connect_and_report
        return connection

    return factory


class _WatchedHTTPHandler(urllib.request.HTTPHandler):
    def http_open(self, req: Any) -> Any:
        return self.do_open(_watched(http.client.HTTPConnection), req)


class _WatchedHTTPSHandler(urllib.request.HTTPSHandler):
    def https_open(self, req: Any) -> Any:
        kwargs: dict[str, Any] = {"context": self._context}
        if sys.version_info < (3, 12):  # check_hostname left http.client in 3.12
            kwargs["check_hostname"] = self._check_hostname
        return self.do_open(_watched(http.client.HTTPSConnection), req, **kwargs)


def open_and_read(
    opener: urllib.request.OpenerDirector, request: Any, timeout: float, max_bytes: int = DEFAULT_MAX_BYTES
) -> tuple[bytes, str]:
    """(body, final URL) of ``request`` through ``opener`` (a :func:`safe_opener`), the whole request within
    ``timeout`` seconds: a watchdog shuts the request's sockets down at the deadline and the request fails
    with :class:`TimeoutError`, however the server trickles its headers or body."""
    sockets: list[socket.socket] = []
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        for sock in list(sockets):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    watchdog = threading.Timer(timeout, expire)
    watchdog.daemon = True
    _WATCHED.sockets = sockets
    watchdog.start()
    try:
        with opener.open(request, timeout=timeout) as response:
            body, url = read_capped(response, max_bytes), response.geturl()
    except (OSError, http.client.HTTPException) as e:
        if expired.is_set() and not isinstance(e, urllib.error.HTTPError):
            raise TimeoutError(f"no complete answer from {request.full_url} within {timeout:g} s") from None
        raise
    finally:
        watchdog.cancel()
        _WATCHED.sockets = None
    if expired.is_set():  # the shutdown may end a read early, as if the body were complete
        raise TimeoutError(f"no complete answer from {request.full_url} within {timeout:g} s")
    return body, url

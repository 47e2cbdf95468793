"""The local web servers of a rebuild (the annotation page, the review app): one access rule for both.

A server listens on localhost unless ``--host`` is given. On any other address it requires an
access token: :func:`access_token` makes one, the URL printed once at the start carries it
(``?token=...``), and :class:`TokenMiddleware` refuses every request without it (query parameter,
``X-Access-Token`` header, or the cookie the first good request sets). The token is never logged.

The apps are Starlette apps run by uvicorn (the ``pipeline`` extra installs both); a port that
is taken is one clear sentence, not a traceback.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
import socket
import sys
from http.cookies import SimpleCookie
from typing import Optional
from urllib.parse import parse_qs

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
TOKEN_PARAM = "token"
TOKEN_COOKIE = "pipeline_access"
TOKEN_HEADER = b"x-access-token"


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and addresses in 127.0.0.0/8 or ``::1``."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def access_token(host: str, given: Optional[str] = None) -> Optional[str]:
    """The token a server on ``host`` requires: None on loopback, else ``given`` or a new random one."""
    if is_loopback(host):
        return None
    return given or secrets.token_urlsafe(24)


def _request_token(scope) -> Optional[str]:
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    if query.get(TOKEN_PARAM):
        return query[TOKEN_PARAM][0]
    for name, value in scope.get("headers", ()):
        if name == TOKEN_HEADER:
            return value.decode("latin-1")
        if name == b"cookie":
            cookie = SimpleCookie()
            cookie.load(value.decode("latin-1"))
            if TOKEN_COOKIE in cookie:
                return cookie[TOKEN_COOKIE].value
    return None


class TokenMiddleware:
    """ASGI middleware: every HTTP request must carry ``token``; the first good one sets a cookie."""

    def __init__(self, app, token: Optional[str]):
        self.app = app
        self.token = token

    async def __call__(self, scope, receive, send):
        if self.token is None or scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        given = _request_token(scope)
        if given is None or not hmac.compare_digest(given.encode(), self.token.encode()):
            if scope["type"] != "http":
                return
            body = b"access token missing or wrong: open the URL the server printed when it started\n"
            await send({"type": "http.response.start", "status": 403, "headers": [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return

        async def send_with_cookie(message):
            if message["type"] == "http.response.start":
                cookie = f"{TOKEN_COOKIE}={self.token}; Path=/; HttpOnly; SameSite=Strict".encode()
                message = {**message, "headers": [*message.get("headers", []), (b"set-cookie", cookie)]}
            await send(message)

        return await self.app(scope, receive, send_with_cookie)


def check_port(host: str, port: int) -> None:
    """Raise OSError with a clear message when ``host:port`` cannot be bound (taken, or not ours)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError as e:
            raise OSError(f"cannot listen on {host}:{port} ({e.strerror}); pass another --port, or stop what uses it") from None


def server_url(host: str, port: int, token: Optional[str], path: str = "/") -> str:
    """The URL to print: with the token as a query parameter when there is one."""
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}{path}"
    return f"{url}?{TOKEN_PARAM}={token}" if token else url


def serve(app, host: str, port: int, *, token: Optional[str], name: str, path: str = "/") -> None:
    """Run ``app`` (wrapped in :class:`TokenMiddleware`) with uvicorn, quietly; print its URL once."""
    import uvicorn

    check_port(host, port)
    print(f"{name}: {server_url(host, port, token, path)}  (Ctrl-C stops it)", file=sys.stderr, flush=True)
    uvicorn.run(TokenMiddleware(app, token), host=host, port=port, log_level="warning", access_log=False)

"""DNS-rebinding defence for a server without AUTH_TOKENS: only requests addressed to its own names pass.

A web page on evil.example can make its name resolve to 127.0.0.1; the victim's browser then sends that
page's requests to the loopback server, where they would own every conversation (and run commands), but
they still carry `Host: evil.example`. Wrapping the whole WSGI app covers the Socket.IO handshake too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")


# `name[:port]` or `[IPv6]:port`; the port may be empty (RFC 9110 allows `Host: localhost:`).
_HOST = re.compile(r"(\[[0-9a-f:.]+\]|[^:\[\]]+)(?::[0-9]*)?")


def host_name(host: str) -> str | None:
    """The name part of a Host header, lower-cased; None when the header is missing or malformed."""
    match = _HOST.fullmatch(host.strip().lower())
    return match.group(1) if match else None


def as_host_name(host: str) -> str:
    """How a listening address or configured name appears in a Host header (IPv6 in brackets)."""
    host = host.strip().lower()
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


class HostGuard:
    """WSGI middleware answering 403 `forbidden_host` unless the Host header names this server."""

    def __init__(self, app: WSGIApplication, names: Iterable[str]):
        self._app = app
        self._names = frozenset(as_host_name(n) for n in names)

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if host_name(environ.get("HTTP_HOST", "")) in self._names:
            return self._app(environ, start_response)
        body = json.dumps({"success": False, "code": "forbidden_host",
                           "error": "the Host header does not name this server (add it to ALLOWED_HOSTS)"}).encode()
        start_response("403 FORBIDDEN", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]


def own_names(listen_host: str, allowed_hosts: Iterable[str]) -> list[str]:
    """The names a request may address: loopback, the listening host, and ALLOWED_HOSTS."""
    return [*LOOPBACK_NAMES, listen_host, *allowed_hosts]

"""Security headers on every response, the Socket.IO transport's and the guards' included (docs/API.md,
"Security headers").

The UI is the built Vite bundle served from this origin: its scripts, styles, fonts and sockets come from
'self' (styles may also be inline: a mermaid diagram's SVG carries its own <style>), images also from
`data:` (the favicon, images in Markdown). Nothing may frame the page
(clickjacking), browsers may not sniff a download into HTML, and no URL leaks in a Referer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

CONTENT_SECURITY_POLICY = "; ".join((
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self' 'unsafe-inline'",  # mermaid's SVG carries a <style>; scripts stay 'self' only
    "img-src 'self' data:",
    "font-src 'self' data:",
    "connect-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
))

HEADERS = (
    ("Content-Security-Policy", CONTENT_SECURITY_POLICY),
    ("X-Frame-Options", "DENY"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("Cross-Origin-Opener-Policy", "same-origin"),
    ("Cross-Origin-Resource-Policy", "same-origin"),
    ("Permissions-Policy", "camera=(), microphone=(), geolocation=(), payment=(), usb=()"),
)
_NAMES = frozenset(name.lower() for name, _ in HEADERS)

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class SecurityHeaders:
    """WSGI middleware: the outermost layer, so every answer gets the headers whoever built it."""

    def __init__(self, app: WsgiApp):
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        def start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            kept = [(k, v) for k, v in headers if k.lower() not in _NAMES]
            return start_response(status, [*kept, *HEADERS], exc_info) if exc_info else \
                start_response(status, [*kept, *HEADERS])

        return self.app(environ, start)

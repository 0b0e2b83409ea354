"""WebSocket upgrades are answered without permessage-deflate (docs/API.md, "Socket.IO").

Browsers and socket.io-client offer the extension on every connection and eventlet's WebSocket server
accepts whatever is offered, so each socket kept a zlib compressor (and a decompressor once a compressed
frame came) for its whole life: most of an idle connection's memory, spent on frames of a few hundred bytes
that deflate barely shrinks. Dropping the client's offer from the request makes the handshake answer without
the extension, which RFC 7692 allows: the client then sends and expects plain frames.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
EXTENSIONS_KEY = "HTTP_SEC_WEBSOCKET_EXTENSIONS"


class DeclineWebSocketCompression:
    """WSGI middleware in front of the Socket.IO transport: removes the client's extension offer."""

    def __init__(self, app: WsgiApp):
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        environ.pop(EXTENSIONS_KEY, None)
        return self.app(environ, start_response)

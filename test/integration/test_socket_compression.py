"""The WebSocket handshake declines permessage-deflate (server/socket_compression.py): a socket kept a zlib
compressor for its whole life, most of an idle connection's memory (issue 26)."""

from __future__ import annotations

import base64
import os
import socket

OFFER = "permessage-deflate; client_max_window_bits"  # what browsers and socket.io-client send


def _handshake(url: str, extensions: str) -> tuple[str, dict[str, str]]:
    """Open a Socket.IO WebSocket by hand; the status line and headers of the server's answer."""
    host, port = url.removeprefix("http://").split(":")
    key = base64.b64encode(os.urandom(16)).decode()
    request = (f"GET /socket.io/?EIO=4&transport=websocket HTTP/1.1\r\nHost: {host}:{port}\r\n"
               f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
               f"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Extensions: {extensions}\r\n\r\n")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request.encode())
        answer = b""
        while b"\r\n\r\n" not in answer:
            data = sock.recv(4096)
            assert data, f"the server closed the connection after {answer!r}"
            answer += data
    status, *lines = answer.split(b"\r\n\r\n")[0].decode().split("\r\n")
    return status, {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}


def test_websocket_upgrade_declines_permessage_deflate(server):
    status, headers = _handshake(server.url, OFFER)

    assert status.startswith("HTTP/1.1 101"), (status, headers)
    assert headers.get("upgrade", "").lower() == "websocket"
    assert "sec-websocket-extensions" not in headers, headers

"""Slow and greedy clients cannot lock others out of the WSGI server (README, "Configuration").

eventlet's HTTP server waits on each connection for as long as the client likes. This protocol bounds
every wait, as nginx's `client_header_timeout`, `client_body_timeout` and `keepalive_timeout` do:

- an idle connection (before its first request, or between keep-alive requests) is closed after
  CLIENT_IDLE_TIMEOUT_S;
- once a request's first byte came, its request line and headers must all arrive within
  CLIENT_HEADER_TIMEOUT_S (a client trickling a byte a second gets no more than that);
- each read of a body and each write of an answer (socket_timeout) may wait CLIENT_BODY_TIMEOUT_S;
- one client address holds at most CLIENT_MAX_CONNECTIONS connections at once; the next is answered
  429 `too_many_connections` and closed at once.

The per-address count lives in the process (green threads share it without a lock: they switch only
on I/O).
"""

from __future__ import annotations

import json
import socket
from collections import Counter
from dataclasses import dataclass

import eventlet
from eventlet.wsgi import HttpProtocol


@dataclass(frozen=True)
class ClientLimits:
    header_timeout_s: float = 10.0
    idle_timeout_s: float = 30.0
    body_timeout_s: float = 60.0
    max_connections: int = 128


LINGER_S = 0.5  # how long a refused connection's input is drained before it is closed


class _HeadersTooSlow(Exception):
    """The request line and headers did not arrive within the header timeout."""


def _refusal(limit: int) -> bytes:
    body = json.dumps({"success": False, "code": "too_many_connections",
                       "error": f"this address already holds {limit} connections (CLIENT_MAX_CONNECTIONS)"}).encode()
    return (b"HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
            b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))


def guarded_protocol(limits: ClientLimits) -> type[HttpProtocol]:
    """An HttpProtocol class for `eventlet.wsgi.server(protocol=...)`, with its own connection count."""
    held: Counter[str] = Counter()
    refusal = _refusal(limits.max_connections)

    class GuardedProtocol(HttpProtocol):  # type: ignore[misc]  # eventlet ships no types
        _address = ""
        _deadline: eventlet.Timeout | None = None

        def setup(self) -> None:
            super().setup()
            address = str(self.client_address[0]) if self.client_address else ""
            if held[address] < limits.max_connections:
                held[address] += 1
                self._address = address
            else:
                self._address = ""

        def handle(self) -> None:
            if not self._address:
                self._refuse()
                return
            super().handle()

        def _refuse(self) -> None:
            """Answer 429, then read what the client sent meanwhile for a moment before closing: closing
            with unread input resets the connection, and the client would lose the answer."""
            try:
                self.wfile.write(refusal)
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_WR)
                self.connection.settimeout(LINGER_S)
                while self.connection.recv(65536):
                    pass
            except OSError:
                pass

        def finish(self) -> None:
            if self._address:
                held[self._address] -= 1
                if held[self._address] <= 0:
                    del held[self._address]
            super().finish()

        def _read_request_line(self) -> bytes | str:
            if self.rfile.closed:
                closed: bytes | str = super()._read_request_line()
                return closed
            self.connection.settimeout(limits.idle_timeout_s)
            try:
                if not self.rfile.peek(1):
                    return ""
            except OSError:
                return ""
            self._deadline = eventlet.Timeout(limits.header_timeout_s, _HeadersTooSlow())
            line: bytes | str = super()._read_request_line()
            return line

        def parse_request(self) -> bool:
            try:
                parsed: bool = super().parse_request()
                return parsed
            finally:
                self._cancel_deadline()

        def handle_one_request(self) -> None:
            try:
                super().handle_one_request()
            except _HeadersTooSlow:
                self.close_connection = True
            finally:
                self._cancel_deadline()

        def _cancel_deadline(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

    return GuardedProtocol


def server_options(limits: ClientLimits) -> dict[str, object]:
    """The keyword arguments of `eventlet.wsgi.server` (through `SocketIO.run`) that apply the limits."""
    return {"protocol": guarded_protocol(limits), "keepalive": limits.idle_timeout_s,
            "socket_timeout": limits.body_timeout_s}

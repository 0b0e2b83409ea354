"""Slow and greedy clients cannot lock others out of the WSGI server (README, "Configuration").

eventlet's HTTP server waits on each connection for as long as the client likes. This protocol bounds
every wait, as nginx's `client_header_timeout`, `client_body_timeout` and `keepalive_timeout` do:

- an idle connection (before its first request, or between keep-alive requests) is closed after
  CLIENT_IDLE_TIMEOUT_S;
- once a request's first byte came, its request line and headers must all arrive within
  CLIENT_HEADER_TIMEOUT_S (a client trickling a byte a second gets no more than that);
- each read of a body and each write of an answer (socket_timeout) may wait CLIENT_BODY_TIMEOUT_S;
- one client address holds at most CLIENT_MAX_CONNECTIONS connections at once; the next is answered
  429 `too_many_connections` and closed at once, its draining outside the server's pool;
- the listening socket's backlog is deep enough that a burst of connections from one client does not
  make the kernel drop everyone else's.

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

from modules.config import Settings


@dataclass(frozen=True)
class ClientLimits:
    """The limits in force: built from the settings (`of`), whose declarations hold their defaults."""

    header_timeout_s: float
    idle_timeout_s: float
    body_timeout_s: float
    max_connections: int

    @classmethod
    def of(cls, settings: Settings) -> ClientLimits:
        return cls(header_timeout_s=settings.client_header_timeout_s, idle_timeout_s=settings.client_idle_timeout_s,
                   body_timeout_s=settings.client_body_timeout_s, max_connections=settings.client_max_connections)


LINGER_S = 0.5  # how long a refused connection's input is drained before it is closed
LISTEN_BACKLOG = 2048  # connections the kernel holds until they are accepted (capped by net.core.somaxconn)
LINGERING = 64  # refused connections drained at once, outside the server's pool; past that closed at once


class _HeadersTooSlow(Exception):
    """The request line and headers did not arrive within the header timeout."""


def _refusal(limit: int) -> bytes:
    body = json.dumps({"success": False, "code": "too_many_connections",
                       "error": f"this address already holds {limit} connections (CLIENT_MAX_CONNECTIONS)"}).encode()
    return (b"HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
            b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))


def _drain(sock: socket.socket) -> None:
    try:
        sock.settimeout(LINGER_S)
        while sock.recv(65536):
            pass
    except OSError:
        pass
    finally:
        sock.close()


def guarded_protocol(limits: ClientLimits) -> type[HttpProtocol]:
    """An HttpProtocol class for `eventlet.wsgi.server(protocol=...)`, with its own connection count."""
    held: Counter[str] = Counter()
    refusal = _refusal(limits.max_connections)
    lingering = eventlet.GreenPool(LINGERING)

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
            with unread input resets the connection, and the client would lose the answer. The draining
            happens outside the server's pool of green threads (a flood of refused connections would
            fill it for everyone), in a pool of its own; past that the connection is closed at once."""
            try:
                self.wfile.write(refusal)
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_WR)
                if lingering.free():
                    lingering.spawn_n(_drain, self.connection.dup())
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


def listen(host: str, port: int) -> socket.socket:
    """The server's listening socket, with a backlog of LISTEN_BACKLOG: with eventlet's default of 50, a
    client opening hundreds of connections at once overflows the kernel's accept queue, and everyone
    else's connection attempts are dropped and retried a second later."""
    family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    listening: socket.socket = eventlet.listen(address, family, backlog=LISTEN_BACKLOG)
    return listening


def server_options(limits: ClientLimits) -> dict[str, object]:
    """The keyword arguments of `eventlet.wsgi.server` (through `SocketIO.run`) that apply the limits."""
    return {"protocol": guarded_protocol(limits), "keepalive": limits.idle_timeout_s,
            "socket_timeout": limits.body_timeout_s}

"""A TCP proxy in front of a real service (PostgreSQL, the scripted model) that can refuse, cut and
black-hole connections, the way a failing network or database host does.

- `refuse()`: every open connection is reset and new ones are reset on arrival (a database that went down);
- `blackhole()`: connections, open and new, are accepted and read but nothing is forwarded either way
  (a host that stopped answering; only the client's own timeouts get it out);
- `cut()`: every open connection is reset once, new ones pass (a connection-dropping network blip);
- `heal()`: forward again; connections that were black-holed are reset, as a stale NAT entry would be.

Plain threads (the proxy lives in the pytest process, the server under test in its own).
"""

from __future__ import annotations

import contextlib
import select
import socket
import struct
import threading
from collections.abc import Iterator
from typing import Self

FORWARD, REFUSE, BLACKHOLE = "forward", "refuse", "blackhole"
_POLL_S = 0.05


def _reset(sock: socket.socket) -> None:
    """Close with RST, not FIN: the peer sees the connection die, not end."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()


class _Link:
    """One client connection and, unless black-holed from the start, its upstream connection."""

    def __init__(self, client: socket.socket, upstream: socket.socket | None):
        self.client = client
        self.upstream = upstream
        self.closed = threading.Event()

    def close(self) -> None:
        if not self.closed.is_set():
            self.closed.set()
            _reset(self.client)
            if self.upstream is not None:
                _reset(self.upstream)


class FaultProxy:
    def __init__(self, target_host: str, target_port: int):
        self._target = (target_host, target_port)
        self._lock = threading.Lock()
        self._links: set[_Link] = set()
        self._mode = FORWARD
        self._listener: socket.socket | None = None
        self._stopping = threading.Event()
        self.port = 0

    # -- lifecycle -------------------------------------------------------
    def start(self) -> Self:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(_POLL_S)
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept_loop, name="fault-proxy", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._listener is not None:
            self._listener.close()
        self._close_links()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- faults ------------------------------------------------------------
    @property
    def mode(self) -> str:
        return self._mode

    def refuse(self) -> None:
        with self._lock:
            self._mode = REFUSE
        self._close_links()

    def blackhole(self) -> None:
        with self._lock:
            self._mode = BLACKHOLE

    def cut(self) -> None:
        self._close_links()

    def heal(self) -> None:
        with self._lock:
            was = self._mode
            self._mode = FORWARD
        if was == BLACKHOLE:
            self._close_links()

    @contextlib.contextmanager
    def down(self, kind: str = REFUSE) -> Iterator[None]:
        """The fault for the duration of the block."""
        self.refuse() if kind == REFUSE else self.blackhole()
        try:
            yield
        finally:
            self.heal()

    def heal_after(self, seconds: float) -> threading.Timer:
        """End the fault after `seconds` (how long the outage lasts, not a wait for anything)."""
        timer = threading.Timer(seconds, self.heal)
        timer.daemon = True
        timer.start()
        return timer

    # -- plumbing ------------------------------------------------------------
    def _close_links(self) -> None:
        with self._lock:
            links, self._links = self._links, set()
        for link in links:
            link.close()

    def _accept_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            mode = self._mode
            if mode == REFUSE:
                _reset(client)
                continue
            upstream = None
            if mode == FORWARD:
                try:
                    upstream = socket.create_connection(self._target, timeout=5)
                except OSError:
                    _reset(client)
                    continue
            link = _Link(client, upstream)
            with self._lock:
                self._links.add(link)
            threading.Thread(target=self._pump, args=(link,), daemon=True).start()

    def _pump(self, link: _Link) -> None:
        """Move bytes both ways while forwarding; read and drop them while black-holed."""
        ends = [link.client] + ([link.upstream] if link.upstream is not None else [])
        try:
            while not link.closed.is_set():
                readable, _, _ = select.select(ends, [], [], _POLL_S)
                for sock in readable:
                    data = sock.recv(65536)
                    if not data:
                        return
                    if self._mode == FORWARD and link.upstream is not None:
                        other = link.upstream if sock is link.client else link.client
                        other.sendall(data)
        except (OSError, ValueError):
            return
        finally:
            with self._lock:
                self._links.discard(link)
            link.close()

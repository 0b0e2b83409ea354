"""The model client's connections, split into small pools so that handing out a connection stays cheap.

The HTTP pool (httpcore2) walks all its connections whenever a request starts or ends, and probes every idle
one's socket for a server-side close (`has_expired`): with hundreds of connections kept alive that walk was
2.5-6.7 % of the server's CPU under load (issue 26). Each request takes the pool with the fewest requests in
flight (the first on a tie), so a lone request always finds pool 0 and the connection it kept alive; under
load the requests spread over the pools and each walk covers at most `POOL_SIZE` connections.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

POOL_SIZE = 32  # connections per pool: a walk of this many costs little

Client = TypeVar("Client")


class ClientPools(Generic[Client]):
    """`max_connections` spread over pools of at most POOL_SIZE, each built by `make(its_share)`."""

    def __init__(self, max_connections: int, make: Callable[[int], Client]) -> None:
        count = -(-max_connections // POOL_SIZE)
        shares = [max_connections // count + (i < max_connections % count) for i in range(count)]
        self.clients = [make(share) for share in shares]
        self._in_flight = [0] * count
        self._lock = threading.Lock()

    @contextmanager
    def client(self) -> Iterator[Client]:
        """The least busy pool's client, counted as busy until the request's response is closed."""
        with self._lock:
            index = min(range(len(self._in_flight)), key=self._in_flight.__getitem__)
            self._in_flight[index] += 1
        try:
            yield self.clients[index]
        finally:
            with self._lock:
                self._in_flight[index] -= 1

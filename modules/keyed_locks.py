"""One lock per key, made when the first holder of the key comes and dropped when the last one leaves, so that
keys seen once (a conversation, a workspace) leave nothing behind. Under eventlet (run.py patches `threading`
first) a holder waits in its green thread, never in a thread of the pool."""

from __future__ import annotations

import threading
from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class KeyedLocks(Generic[K]):
    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._held: dict[K, tuple[threading.Lock, int]] = {}  # key -> its lock, and how many hold or wait for it

    @contextmanager
    def held(self, key: K) -> Iterator[None]:
        """Hold `key`'s lock for the block; the holders of other keys go on."""
        with self._guard:
            lock, users = self._held.get(key, (threading.Lock(), 0))
            self._held[key] = (lock, users + 1)
        try:
            with lock:
                yield
        finally:
            with self._guard:
                lock, users = self._held[key]
                if users == 1:
                    del self._held[key]
                else:
                    self._held[key] = (lock, users - 1)

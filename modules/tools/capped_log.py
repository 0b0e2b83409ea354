"""A command's output log that never grows past its cap: the head and the tail are kept, the middle dropped.

A command that prints without end (`yes`) must not fill the disk, and what a reader
needs is how the output started and how it ended. The file holds the first
`head_bytes` bytes, then a marker naming how much was dropped, then the latest
`tail_bytes` bytes; the tail section is rewritten in place now and then, so the
file stays readable (and its end current) while the command runs.
"""

from __future__ import annotations

import time
from pathlib import Path

TAIL_FLUSH_S = 0.25


def drop_marker(dropped: int) -> bytes:
    return f"\n[... {dropped} bytes of output dropped ...]\n".encode()


class CappedLog:
    def __init__(self, path: Path, *, max_bytes: int):
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = path.open("wb")
        self._head_left = max_bytes // 2
        self._head_len = 0
        self._tail_max = max_bytes - self._head_left
        self._tail = bytearray()
        self._dropped = 0
        self._dirty = False
        self._flushed_at = 0.0

    @property
    def overflowing(self) -> bool:
        """The head is full: further output only moves the tail."""
        return self._head_left == 0

    @property
    def dropped(self) -> int:
        return self._dropped

    def write(self, data: bytes) -> None:
        if self._head_left:
            head, data = data[:self._head_left], data[self._head_left:]
            self._fh.write(head)
            self._head_left -= len(head)
            self._head_len += len(head)
            self._fh.flush()  # a running command's output is read from the file (API, notices of the lost)
            if not data:
                return
        self._tail += data
        excess = len(self._tail) - self._tail_max
        if excess > 0:
            del self._tail[:excess]
            self._dropped += excess
        self._dirty = True
        if time.monotonic() - self._flushed_at >= TAIL_FLUSH_S:
            self.flush()

    def flush(self) -> None:
        if self._dirty:
            self._fh.seek(self._head_len)
            if self._dropped:
                self._fh.write(drop_marker(self._dropped))
            self._fh.write(self._tail)
            self._fh.truncate()
            self._dirty = False
            self._flushed_at = time.monotonic()
        self._fh.flush()

    def close(self) -> None:
        self.flush()
        self._fh.close()

"""Durable, per-task numbered event log.

A task's events are written only by the process that runs it, so the next
index is kept in memory (seeded from the database once); the unique
(task_id, idx) constraint guards the rest. The per-task lock is held across
the caller's delivery too, so socket clients receive a task's events in log order.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy.orm import Session

from modules.storage import tasks as task_store
from modules.storage.db import Database


class EventLog:
    def __init__(self, db: Database):
        self._db = db
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._next: dict[str, int] = {}

    def append(self, task_id: str, event_type: str, data: dict[str, Any],
               deliver: Callable[[int], None] | None = None) -> int:
        return self.append_many(task_id, [(event_type, data)], deliver)

    def append_many(self, task_id: str, events: list[tuple[str, dict[str, Any]]],
                    deliver: Callable[[int], None] | None = None) -> int:
        """Write the events in one transaction; `deliver` gets the first one's index. Returns it."""
        with self.exclusive(task_id):
            idx = self._next.get(task_id)
            if idx is None:
                idx = task_store.next_event_idx(self._db, task_id)
            task_store.insert_events(self._db, task_id, idx, events)
            self._next[task_id] = idx + len(events)
            if deliver is not None:
                deliver(idx)
            return idx

    @contextmanager
    def exclusive(self, task_id: str) -> Iterator[None]:
        """No other event of the task is written meanwhile (for `append_in` and its delivery)."""
        with self._guard:
            lock = self._locks.setdefault(task_id, threading.Lock())
        with lock:
            yield

    def append_in(self, session: Session, task_id: str, events: list[tuple[str, dict[str, Any]]]) -> int:
        """Write the events inside the caller's transaction (a task's end, with its status); returns the
        first one's index. Call under `exclusive`, and `forget` the task once that transaction ended."""
        idx = task_store.next_event_idx_in(session, task_id)
        task_store.insert_events_in(session, task_id, idx, events)
        return idx

    def forget(self, task_id: str) -> None:
        """Drop the cached state of a finished task."""
        with self._guard:
            self._locks.pop(task_id, None)
            self._next.pop(task_id, None)

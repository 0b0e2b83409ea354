"""Durable, per-task numbered event log.

A task's events are written only by the process that runs it, so the next
index is kept in memory (seeded from the database once); the unique
(task_id, idx) constraint guards the rest. The per-task lock is held across
the caller's delivery too, so socket clients receive a task's events in log order.

Writes of every task of the process go through one group commit (one transaction
per short batch); a caller delivers its events only once they are durable. Consecutive
`text_chunk` events of one message within `flush_s` (STREAM_FLUSH_MS) become one event:
the first chunk takes the next index and waits in memory, later chunks of the message
append their text to it, and it is written and delivered when the window ends, or at
once when any other event of the task comes (see README, "Configuration"); under load a message's later
chunks wait longer (`StreamWindow`, STREAM_EVENTS_PER_S), so the flusher sleeps until the earliest chunk
due, and a chunk due sooner (a message's first) wakes it. A chunk that
comes after the window of the one waiting (or of another message) takes the next index
and waits behind it: the flusher writes a task's waiting chunks in order, in its batch,
so the model's reader never waits for a write (under load it wrote the late one itself:
a group-commit wait per chunk).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from modules.event_catalogue import ReasoningChunkEvent, TextChunkEvent
from modules.storage import tasks as task_store
from modules.storage.db import Database
from modules.storage.group_commit import GroupCommit
from server.turns.stream_window import StreamWindow

log = logging.getLogger(__name__)

Deliver = Callable[[int], None]
CHUNK = TextChunkEvent.TYPE
REASONING_CHUNK = ReasoningChunkEvent.TYPE  # the model's thinking as it streams, coalesced the same way
CHUNK_TYPES = (CHUNK, REASONING_CHUNK)


@dataclass
class _Buffered:
    """A coalesced text chunk not yet written: its index is taken, its text still grows."""

    idx: int
    data: dict[str, Any]
    deliver: Callable[[int, list[tuple[str, dict[str, Any]]]], None] | None
    due: float
    type: str = CHUNK


class EventLog:
    def __init__(self, db: Database, *, flush_s: float = 0.0, events_per_s: float = 0.0,
                 writer: GroupCommit | None = None, spawn: Callable[..., Any] | None = None):
        """`events_per_s`: the chunk events a second past which the window widens (`StreamWindow`; 0: never).
        `spawn`: how a flushed chunk's delivery gets its thread (the server's green spawn: one per chunk
        of every stream, a Thread object each cost a visible share of the CPU under load, issue 26)."""
        self._db = db
        self._spawn = spawn or _thread
        self._flush_s = flush_s
        self._window = StreamWindow(flush_s, events_per_s)
        self.writer = writer or GroupCommit(db)
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._next: dict[str, int] = {}
        self._buffered: dict[str, list[_Buffered]] = {}  # per task, in index order; only the last one grows
        self._due = threading.Condition()
        # What the flusher sleeps until: a chunk due sooner wakes it (a message's first chunk under load);
        # -inf while it writes (it looks again after), +inf while it looks.
        self._sleep_until = -math.inf
        self._flusher: threading.Thread | None = None

    def append(self, task_id: str, event_type: str, data: dict[str, Any],
               deliver: Deliver | None = None) -> int:
        return self.append_many(task_id, [(event_type, data)], deliver)

    def begin(self, task_id: str, written: int = 0) -> None:
        """A task this process has just created, with its first `written` events (written in the transaction that
        created it): its next index is known without a read."""
        with self._guard:
            self._next.setdefault(task_id, written)

    def append_many(self, task_id: str, events: list[tuple[str, dict[str, Any]]],
                    deliver: Deliver | None = None, *, step: Callable[[Session], Any] | None = None) -> int:
        """Write the events (durably, before `deliver` gets the first one's index). Returns that index.
        `step`: a write of the caller's committed in the same batch (`GroupCommit.insert`)."""
        with self.exclusive(task_id):
            idx = self._take(task_id, len(events))
            self._write(task_id, [(idx, events)], step)
            if deliver is not None:
                deliver(idx)
            return idx

    def append_chunk(self, task_id: str, data: dict[str, Any],
                     deliver: Callable[[int, list[tuple[str, dict[str, Any]]]], None], event_type: str = CHUNK) -> int:
        """A `text_chunk` or `reasoning_chunk` (with `message_id` and `content`): coalesced with the
        message's previous chunk of the same type while that one waits; `deliver(idx, payloads)` sends what
        was written. Returns the chunk's index."""
        if self._flush_s <= 0:
            return self.append_many(task_id, [(event_type, data)],
                                    lambda first: deliver(first, [(event_type, data)]))
        with self._lock_of(task_id):
            waiting = self._buffered.get(task_id)
            held = waiting[-1] if waiting else None
            moment = time.monotonic()
            if held is not None and held.type == event_type and held.data.get("message_id") == data.get("message_id") \
                    and moment < held.due:
                held.data = {**held.data, "content": held.data.get("content", "") + data.get("content", "")}
                return held.idx
            idx = self._take(task_id, 1)
            due = moment + self._window.wait(task_id, (data.get("message_id"), event_type), moment)
            if waiting:  # a task's waiting chunks are due in their order
                due = max(due, waiting[-1].due)
            idle = not self._buffered
            self._buffered.setdefault(task_id, []).append(_Buffered(idx, dict(data), deliver, due, event_type))
        # The flusher needs waking only when nothing waited or this is due before what it sleeps until: not
        # once a chunk (taking its lock for every chunk of 500 streams was a visible cost, issue 26).
        if idle or due < self._sleep_until or self._flusher is None:
            with self._due:
                self._ensure_flusher()
                self._due.notify()
        return idx

    @contextmanager
    def exclusive(self, task_id: str) -> Iterator[None]:
        """No other event of the task is written meanwhile (for `append_in` and its delivery); a chunk
        still waiting is written first, so it keeps its place before whatever comes next."""
        with self._lock_of(task_id):
            self._flush_locked(task_id)
            yield

    def append_in(self, session: Session, task_id: str, events: list[tuple[str, dict[str, Any]]]) -> int:
        """Write the events inside the caller's transaction (a task's end, with its status); returns the
        first one's index. Call under `exclusive`, and `forget` the task once that transaction ended. The index
        is the one kept in memory (every event of the task went through this log); read from the log only when
        it is not (a write failed, or this runs again after its batch failed: `_next` was dropped below)."""
        with self._guard:
            idx = self._next.get(task_id)
        if idx is None:
            idx = task_store.next_event_idx_in(session, task_id)
        task_store.insert_events_in(session, task_id, idx, events)
        with self._guard:  # an event that follows before `forget` (suggestions) reads its index from the log
            self._next.pop(task_id, None)
        return idx

    def continue_at(self, task_id: str, idx: int) -> None:
        """The task's next event takes `idx`, as its caller knows (a turn's end wrote the events before it),
        unless the log keeps an index of its own. Were it wrong, the log's unique (task, index) refuses the write,
        and the index is read again for the next one."""
        with self._guard:
            self._next.setdefault(task_id, idx)

    def chunk_wait(self) -> float:
        """Seconds a message's later chunks wait now: `STREAM_FLUSH_MS`, longer under load."""
        return self._window.later(time.monotonic())

    def forget(self, task_id: str) -> None:
        """Drop the cached state of a finished task."""
        with self._guard:
            self._locks.pop(task_id, None)
            self._next.pop(task_id, None)
        self._window.forget(task_id)

    # -- inside a task's lock -------------------------------------------------------------

    def _lock_of(self, task_id: str) -> threading.Lock:
        """The task's lock, for a `with` (a lock, not a generator's context manager: taken once per chunk)."""
        with self._guard:
            return self._locks.setdefault(task_id, threading.Lock())

    def _take(self, task_id: str, count: int) -> int:
        idx = self._next.get(task_id)
        if idx is None:
            idx = task_store.next_event_idx(self._db, task_id)
        self._next[task_id] = idx + count
        return idx

    def _write(self, task_id: str, runs: list[tuple[int, list[tuple[str, dict[str, Any]]]]],
               step: Callable[[Session], Any] | None = None) -> None:
        try:
            self.writer.insert(task_store.TASK_EVENTS, task_store.event_rows(task_id, runs), step=step)
        except BaseException:
            with self._guard:
                self._next.pop(task_id, None)  # read the next index from the log again
            raise

    def _flush_locked(self, task_id: str) -> None:
        waiting = self._buffered.pop(task_id, None)
        if not waiting:
            return
        try:
            self._write(task_id, [(held.idx, [(held.type, held.data)]) for held in waiting])
        except IntegrityError:  # only a process that took the task over writes at our index: theirs now
            log.warning("task %s: index %d of its log is taken; chunks written after a takeover are dropped",
                        task_id, waiting[0].idx)
            return
        except BaseException:
            self._buffered[task_id] = waiting  # the caller's retry writes them, still before what follows
            raise
        _deliver_each(waiting)

    # -- the window's end -----------------------------------------------------------------

    def _ensure_flusher(self) -> None:
        if self._flusher is None or not self._flusher.is_alive():
            self._flusher = threading.Thread(target=self._flush_due, name="stream-flush", daemon=True)
            self._flusher.start()

    def _flush_due(self) -> None:
        """Write every chunk whose window ended, all in one batch, then deliver each: a chunk whose task
        is busy is left to that task's writer, which writes it before its own event."""
        while True:
            with self._due:
                self._sleep_until = math.inf
                due = self._earliest()
                while due is None or due > time.monotonic():
                    self._sleep_until = math.inf if due is None else due
                    self._due.wait(None if due is None else max(0.0, due - time.monotonic()))
                    self._sleep_until = math.inf
                    due = self._earliest()
                self._sleep_until = -math.inf
            try:
                self._flush_batch()
            except Exception:  # it lives on: only a chunk that finds nothing waiting makes sure it runs
                log.exception("writing the stream's waiting chunks failed")
                time.sleep(self._flush_s)

    def _earliest(self) -> float | None:
        return min((w[0].due for w in list(self._buffered.values()) if w), default=None)

    def _flush_batch(self) -> None:
        taken: list[tuple[str, threading.Lock, list[_Buffered]]] = []
        moment = time.monotonic()
        for task_id in [t for t, w in list(self._buffered.items()) if w and w[0].due <= moment]:
            lock = self._lock_of(task_id)
            if not lock.acquire(blocking=False):
                continue
            waiting = self._buffered.pop(task_id, None) or []
            due = [held for held in waiting if held.due <= moment]  # a head of the list: dues grow along it
            if waiting[len(due):]:
                self._buffered[task_id] = waiting[len(due):]
            if not due:
                lock.release()
                continue
            taken.append((task_id, lock, due))
        if not taken:
            time.sleep(min(self._flush_s, 0.005))  # every due chunk's task is busy writing it
            return
        try:
            errors = self.writer.insert_each(task_store.TASK_EVENTS, [
                task_store.event_rows(task_id, [(held.idx, [(held.type, held.data)]) for held in due])
                for task_id, _, due in taken])
        except BaseException:
            for _, lock, _held in taken:
                lock.release()
            raise
        for (task_id, lock, due), error in zip(taken, errors, strict=True):
            # Each task's delivery on its own thread, so a task waits for its own room's send, not for all of them.
            self._spawn(self._deliver_and_release, task_id, lock, due, error)

    def _deliver_and_release(self, task_id: str, lock: threading.Lock, due: list[_Buffered],
                             error: BaseException | None) -> None:
        try:
            if error is not None:  # lost with their write, and so the chunks behind them: the task's next
                with self._guard:  # event re-reads its index
                    self._next.pop(task_id, None)
                self._buffered.pop(task_id, None)
            else:
                _deliver_each(due)
        finally:
            lock.release()


def _deliver_each(written: list[_Buffered]) -> None:
    for held in written:
        if held.deliver is not None:
            held.deliver(held.idx, [(held.type, held.data)])


def _thread(target: Callable[..., Any], *args: Any) -> None:
    threading.Thread(target=target, args=args, daemon=True).start()

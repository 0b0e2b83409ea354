"""The usage ledger: one row per model request, written with the turn's own writes.

A row is deferred into the process's group commit (modules/storage/group_commit.py): it goes out in the
next batch any writer commits, which for an agent's round is its `text_end` event right after the
request, so metering costs no commit of its own. When no write follows within `grace_s` (a failed
suggestion request), the flusher commits what is left. The turn's own sums are kept in memory for its
`task_complete` event; the database is the source of truth for everything else (budgets, the answers).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, cast

from sqlalchemy import Table

from modules.storage import usage as usage_store
from modules.storage.db import Database
from modules.storage.group_commit import GroupCommit
from modules.storage.models import ModelUsage
from modules.storage.usage import UsageTotals
from modules.usage.records import UsageRecord

log = logging.getLogger(__name__)

GRACE_S = 0.25
# Declarative mapping types `__table__` as a FromClause; a mapped class's is its Table.
_MODEL_USAGE = cast(Table, ModelUsage.__table__)
_USERS_CACHED = 10_000


def row_of(record: UsageRecord) -> dict[str, Any]:
    ctx = record.context
    return dict(user_id=record.user_id, conversation_id=ctx.conversation_id, task_id=ctx.task_id,
                agent_id=ctx.agent_id, agent=ctx.agent[:128], purpose=ctx.purpose, model=record.model[:128],
                status=record.status, estimated=record.estimated, prompt_tokens=record.prompt_tokens,
                completion_tokens=record.completion_tokens, cached_tokens=record.cached_tokens,
                reasoning_tokens=record.reasoning_tokens, cost=record.cost, latency_s=record.latency_s,
                first_token_s=record.first_token_s, created_at=record.created_at)


class UsageLedger:
    def __init__(self, db: Database, writer: GroupCommit, *, grace_s: float = GRACE_S,
                 listeners: tuple[Callable[[UsageRecord], None], ...] = ()):
        self._db, self._writer, self._grace_s = db, writer, grace_s
        self._lock = threading.Lock()
        self._tasks: dict[str, UsageTotals] = {}
        self._users: dict[str, int | None] = {}
        self._due = threading.Condition()
        self._deadline: float | None = None
        self._flusher: threading.Thread | None = None
        self._listeners = listeners  # told of every record (the operator's metrics)

    def user_of(self, conversation_id: str | None) -> int | None:
        """The conversation's owner (it never changes), read once per process."""
        if conversation_id is None:
            return None
        with self._lock:
            if conversation_id in self._users:
                return self._users[conversation_id]
        user_id = usage_store.user_of_conversation(self._db, conversation_id)
        with self._lock:
            if len(self._users) >= _USERS_CACHED:
                self._users.clear()
            self._users[conversation_id] = user_id
        return user_id

    def know(self, conversation_id: str, user_id: int) -> None:
        """The conversation's owner as a caller has just read it (a send): `user_of` needs no read then."""
        with self._lock:
            if conversation_id not in self._users:
                if len(self._users) >= _USERS_CACHED:
                    self._users.clear()
                self._users[conversation_id] = user_id

    def record(self, record: UsageRecord) -> None:
        """Queue the request's row for the next batch, add it to its task's sums, tell the listeners."""
        self._writer.defer(_MODEL_USAGE, [row_of(record)])
        task_id = record.context.task_id
        if task_id is not None:
            with self._lock:
                self._tasks.setdefault(task_id, UsageTotals()).add(
                    record.prompt_tokens, record.completion_tokens, record.cached_tokens, record.reasoning_tokens,
                    1, int(record.estimated), record.cost)
        for listener in self._listeners:
            try:
                listener(record)
            except Exception:
                log.exception("a usage listener failed")
        self._flush_later()

    def take_task(self, task_id: str) -> UsageTotals:
        """The task's sums (its turn has ended: forgotten here)."""
        with self._lock:
            return self._tasks.pop(task_id, None) or UsageTotals()

    def flush(self) -> None:
        """Commit the rows still deferred (before reading the ledger back, e.g. a budget check)."""
        self._writer.flush_deferred()

    def _flush_later(self) -> None:
        with self._due:
            if self._deadline is None:
                self._deadline = time.monotonic() + self._grace_s
                self._due.notify()
            if self._flusher is None or not self._flusher.is_alive():
                self._flusher = threading.Thread(target=self._flush_due, name="usage-flush", daemon=True)
                self._flusher.start()

    def _flush_due(self) -> None:
        while True:
            with self._due:
                while self._deadline is None or self._deadline > time.monotonic():
                    self._due.wait(None if self._deadline is None else max(0.0, self._deadline - time.monotonic()))
                self._deadline = None
            try:
                self.flush()
            except Exception:  # the database is away: the rows wait in the queue for the next batch
                log.warning("usage rows could not be written yet; they go out with the next batch")

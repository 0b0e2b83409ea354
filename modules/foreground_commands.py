"""Foreground commands recorded while they run, so that the per-user cap on them (MAX_FOREGROUND_COMMANDS_PER_USER,
README "Configuration"; modules/work_caps.py) counts those of every server process.

A foreground command is otherwise only its tool call in the agent's history and a log file: nothing another
process could count. Its row is inserted under the user's work lock after the cap's check, and deleted when the
command ends; a process that dies leaves its rows to `processes.forget`, which deletes them with it. A row whose
delete failed (no database when its command ended) is deleted by the membership sweep (`delete_leftovers`, every
few seconds and when the database is back: server/cluster.py), not left to count until this process's next start.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import delete

from modules.storage.db import Database
from modules.storage.models import ForegroundCommand
from modules.storage.records import new_id, now
from modules.work_caps import WorkCaps, check, starting

log = logging.getLogger(__name__)


class ForegroundCommands:
    def __init__(self, db: Database, caps: WorkCaps, owner: str):
        self._db = db
        self._caps = caps
        self._owner = owner
        self._lock = threading.Lock()
        self._leftover: set[str] = set()  # rows whose delete failed (no database then): `delete_leftovers`

    @contextmanager
    def running(self, conversation_id: str, agent_id: str) -> Iterator[None]:
        """Held while one foreground command runs. CapReached (nothing recorded, so nothing may start) when the
        user already runs as many as the cap allows."""
        self.delete_leftovers()
        row_id = new_id()
        with starting(self._db, conversation_id):
            check(self._db, self._caps.foreground_commands, conversation_id)
            try:
                with self._db.write() as s:
                    s.add(ForegroundCommand(id=row_id, conversation_id=conversation_id, agent_id=agent_id,
                                            owner=self._owner, created_at=now()))
            except Exception:
                # The command will not run, but the insert may have committed unreported (a connection lost
                # after its COMMIT): a row no delete would ever name, counted for as long as this process lives.
                with self._lock:
                    self._leftover.add(row_id)
                raise
        try:
            yield
        finally:
            self._delete({row_id})

    def delete_leftovers(self) -> None:
        """Delete the rows whose delete failed; nothing to do (no query) when there are none. Every process counts
        them against their user's cap until then. Failing again, they stay for the next call."""
        with self._lock:
            leftover, self._leftover = self._leftover, set()
        if leftover:
            self._delete(leftover)

    def _delete(self, row_ids: set[str]) -> None:
        """A command that ended no longer counts; a failed delete is retried (`delete_leftovers`) rather than
        failing the result of the one that ended."""
        try:
            with self._db.write() as s:
                s.execute(delete(ForegroundCommand).where(ForegroundCommand.id.in_(row_ids)))
        except Exception:
            log.exception("could not delete the record of %d ended foreground command(s); retried later",
                          len(row_ids))
            with self._lock:
                self._leftover |= row_ids

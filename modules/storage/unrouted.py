"""User messages stored before they are routed: rows of the queue table in status `routing`.

Acknowledging a message before its route is known needs it durable first. It is
stored as a row of `pending_messages` that no drain reads (every reader selects
`queued`), addressed to the master for the time being; routing then rewrites its
receiver and releases it with a conditional UPDATE, so of two processes routing
the same row only one queues it. `seq` keeps the order of a conversation's sends.
"""

from __future__ import annotations

from typing import Any, Final

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from modules.statuses import QueueStatus
from modules.storage.db import Database
from modules.storage.message_meta import RoutedTo
from modules.storage.models import PendingMessageRow
from modules.storage.pending_messages import QUEUED
from modules.storage.results import rowcount

ROUTING: Final = QueueStatus.ROUTING


def store_in(session: Session, values: dict[str, Any]) -> bool:
    """Hold a message for routing unless one with its id exists (a retried send is stored once)."""
    if session.scalar(select(PendingMessageRow.seq).where(PendingMessageRow.id == values["id"])) is not None:
        return False
    session.add(PendingMessageRow(**values, status=ROUTING))
    return True


def unrouted(db: Database, conversation_id: str) -> list[PendingMessageRow]:
    """The conversation's messages still waiting for a route, in the order they were sent."""
    with db.read() as s:
        return list(s.scalars(select(PendingMessageRow).where(PendingMessageRow.conversation_id == conversation_id,
                                                              PendingMessageRow.status == ROUTING)
                              .order_by(PendingMessageRow.seq)))


def conversations_with_unrouted(db: Database) -> list[str]:
    with db.read() as s:
        return list(s.scalars(select(PendingMessageRow.conversation_id)
                              .where(PendingMessageRow.status == ROUTING).distinct()))


def release_in(session: Session, message_id: str, values: dict[str, Any]) -> bool:
    """Queue a held message for the receiver in `values`; False when it was released already."""
    done = session.execute(update(PendingMessageRow)
                           .where(PendingMessageRow.id == message_id, PendingMessageRow.status == ROUTING)
                           .values(**values, status=QUEUED))
    return rowcount(done) == 1


def record_delivery(db: Database, message_id: str, routed: RoutedTo) -> None:
    """Remember where a released message went (`route`, `delivery`, `task_id`), for `GET /api/messages/<id>`."""
    with db.write() as s:
        row = s.scalars(select(PendingMessageRow).where(PendingMessageRow.id == message_id)).first()
        if row is not None:
            row.meta = row.typed_meta.merged(routed=routed).dump()

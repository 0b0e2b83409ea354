"""User messages stored before they are routed: rows of the queue table in status `routing`.

Acknowledging a message before its route is known needs it durable first. It is
stored as a row of `pending_messages` that no drain reads (every reader selects
`queued`), addressed to the master for the time being; routing then rewrites its
receiver and releases it with a conditional UPDATE, so of two processes routing
the same row only one queues it. `seq` keeps the order of a conversation's sends.
`routing_process` names the process whose inbox routes it: the held messages of a
process gone and forgotten are claimed by a live one (`claim_orphans`).
"""

from __future__ import annotations

import functools
from typing import Any, Final

from sqlalchemy import Update, bindparam, or_, select, update
from sqlalchemy.orm import Session

from modules.statuses import QueueStatus
from modules.storage.db import Database
from modules.storage.message_meta import MessageMeta, RoutedTo
from modules.storage.models import PendingMessageRow, ServerProcess
from modules.storage.pending_messages import QUEUE, QUEUED, queue_in
from modules.storage.results import rowcount

ROUTING: Final = QueueStatus.ROUTING
# Every send runs these: built once (modules/storage/agents.py says why).
_UNROUTED = select(PendingMessageRow).where(PendingMessageRow.conversation_id == bindparam("conversation"),
                                            PendingMessageRow.status == ROUTING).order_by(PendingMessageRow.seq)
_SET_META = QUEUE.update().where(QUEUE.c.id == bindparam("held")).values(metadata=bindparam("new_meta"))
_CLAIM = QUEUE.update().where(
    QUEUE.c.conversation_id == bindparam("conversation"), QUEUE.c.status == ROUTING,
    or_(QUEUE.c.routing_process.is_(None), QUEUE.c.routing_process.not_in(select(ServerProcess.id)))) \
    .values(routing_process=bindparam("me"))


def store_in(session: Session, values: dict[str, Any], *, routing_process: str) -> None:
    """Hold a message for routing by `routing_process` (the process storing it) unless one with its id exists
    (a retried send is stored once): one INSERT that skips a known id, as a send's."""
    queue_in(session, [{**values, "routing_process": routing_process}], ROUTING)


def unrouted(db: Database, conversation_id: str) -> list[PendingMessageRow]:
    """The conversation's messages still waiting for a route, in the order they were sent."""
    with db.read() as s:
        return list(s.scalars(_UNROUTED, {"conversation": conversation_id}))


def conversations_routed_by(db: Database, process_id: str) -> list[str]:
    """The conversations with messages held for `process_id` to route."""
    with db.read() as s:
        return list(s.scalars(select(PendingMessageRow.conversation_id).where(
            PendingMessageRow.status == ROUTING, PendingMessageRow.routing_process == process_id).distinct()))


def orphaned_conversations(db: Database, me: str) -> list[str]:
    """The conversations with held messages that no registered process routes (their process was gone and
    forgotten, `processes.forget`, or they were stored before the routing process was recorded), leaving out
    those with a held message of another registered process: its worker routes every held message of the
    conversation, in send order, and `me` would only race it."""
    with db.read() as s:
        held = s.execute(select(PendingMessageRow.conversation_id, PendingMessageRow.routing_process)
                         .where(PendingMessageRow.status == ROUTING).distinct()).all()
        registered = set(s.scalars(select(ServerProcess.id)))
    routed_elsewhere = {conv for conv, process in held if process in registered and process != me}
    return sorted({conv for conv, process in held if process not in registered} - routed_elsewhere)


def claim_orphans_in(session: Session, conversation_id: str, me: str) -> bool:
    """Compare-and-set: the conversation's held messages that no registered process routes become `me`'s.
    False when there were none left (another survivor claimed them first: only one routes them)."""
    return rowcount(session.execute(_CLAIM, {"conversation": conversation_id, "me": me})) > 0


def claim(db: Database, conversation_id: str, me: str) -> bool:
    """`claim_orphans_in` in a transaction of its own."""
    with db.write() as s:
        return claim_orphans_in(s, conversation_id, me)


def claim_orphans(db: Database, me: str) -> list[str]:
    """Claim the held messages of every orphaned conversation (`orphaned_conversations`) for `me`, one
    conversation a transaction; the conversations claimed."""
    return [conversation_id for conversation_id in orphaned_conversations(db, me) if claim(db, conversation_id, me)]


def release_in(session: Session, message_id: str, values: dict[str, Any]) -> bool:
    """Queue a held message for the receiver in `values`; False when it was released already."""
    params = {f"new_{key}": value for key, value in values.items()}
    return rowcount(session.execute(_release(tuple(values)), {**params, "held": message_id})) == 1


@functools.lru_cache(maxsize=16)
def _release(attributes: tuple[str, ...]) -> Update:
    """`release_in`'s statement for the attributes it sets, built once."""
    return update(PendingMessageRow) \
        .where(PendingMessageRow.id == bindparam("held"), PendingMessageRow.status == ROUTING) \
        .values({getattr(PendingMessageRow, name): bindparam(f"new_{name}") for name in attributes}) \
        .values(status=QUEUED).execution_options(synchronize_session=False)


def record_delivery_in(session: Session, message_id: str, released: MessageMeta, routed: RoutedTo) -> None:
    """Remember where a released message went (`route`, `delivery`, `task_id`), for `GET /api/messages/<id>`,
    inside the caller's transaction (the group commit's, in the routing inbox). `released`: the meta its release
    wrote, which nothing changes after it (so no read of it)."""
    set_meta_in(session, message_id, released.merged(routed=routed))


def set_meta_in(session: Session, message_id: str, meta: MessageMeta) -> None:
    """Write a released message's meta whole."""
    session.execute(_SET_META, {"held": message_id, "new_meta": meta.dump()})

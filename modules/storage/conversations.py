"""Conversations and their agents' rows."""

from __future__ import annotations

from typing import cast

from sqlalchemy import Select, Table, and_, bindparam, delete, exists, func, or_, select, update
from sqlalchemy.orm import Session

from modules.statuses import AgentState, CommandStatus
from modules.storage.conversation_pages import ConversationCursor, ConversationPage
from modules.storage.db import Database
from modules.storage.models import (
    Agent,
    BackgroundCommand,
    ContextSummary,
    Conversation,
    Message,
    PendingMessageRow,
    SessionEntry,
    Task,
    TaskEvent,
)
from modules.storage.pending_messages import CONSUMED, QUEUED
from modules.storage.records import new_id, now
from modules.storage.results import rowcount
from modules.storage.tasks import ACTIVE_STATUSES
from modules.storage.unrouted import ROUTING

# Statements every send runs, built once (modules/storage/agents.py says why).
_BY_ID = select(Conversation).where(Conversation.id == bindparam("conversation"))
_CONVERSATIONS = cast(Table, Conversation.__table__)
_WITH_MASTER = select(Conversation, Agent.id).join(
    Agent, (Agent.conversation_id == Conversation.id) & (Agent.kind == "master")).where(
    Conversation.id == bindparam("conversation"))
_WITH_AGENTS = select(Conversation, Agent).join(Agent, Agent.conversation_id == Conversation.id).where(
    Conversation.id == bindparam("conversation")).order_by(Agent.created_at, Agent.id)
_TOUCH = _CONVERSATIONS.update().where(_CONVERSATIONS.c.id == bindparam("conversation")) \
    .values(updated_at=bindparam("at"))
_TOUCH_TITLED = _TOUCH.values(title=bindparam("new_title"))


def create_conversation(db: Database, user_id: int, title: str,
                        master_name: str = "MasterAgent") -> tuple[Conversation, Agent]:
    """A conversation is born with its master agent, idle."""
    ts = now()
    conv = Conversation(id=new_id(), user_id=user_id, title=title, created_at=ts, updated_at=ts)
    master = Agent(
        id=new_id(), conversation_id=conv.id, display_name=master_name, role=master_name,
        kind="master", parent_id=None, state=AgentState.IDLE, version=0, created_at=ts, updated_at=ts,
    )
    with db.write() as s:
        s.add(conv)
        s.flush()
        s.add(master)
    return conv, master


def get_conversation(db: Database, conversation_id: str, user_id: int | None = None) -> Conversation | None:
    """The conversation, or None when it does not exist or belongs to another user; asked for a user, a
    deleted conversation is None too (the server's own work winding down still reads it)."""
    with db.read() as s:
        conv = s.scalars(_BY_ID, {"conversation": conversation_id}).first()
    if conv is None or (user_id is not None and not _visible_to(conv, user_id)):
        return None
    return conv


def _visible_to(conv: Conversation, user_id: int) -> bool:
    """The user's own, not deleted."""
    return conv.user_id == user_id and conv.deleted_at is None


def get_conversation_and_master(db: Database, conversation_id: str,
                                user_id: int) -> tuple[Conversation, str] | None:
    """`get_conversation` for the user, with its master agent's id, in one statement (a send wants both)."""
    with db.read() as s:
        row = s.execute(_WITH_MASTER, {"conversation": conversation_id}).first()
    if row is None or not _visible_to(row[0], user_id):
        return None
    return row[0], row[1]


def get_conversation_and_agents(db: Database, conversation_id: str) -> tuple[Conversation, list[Agent]] | None:
    """The conversation (deleted ones too, as `get_conversation` without a user) and its agents, oldest first, in
    one statement (routing a held message wants both)."""
    with db.read() as s:
        rows = s.execute(_WITH_AGENTS, {"conversation": conversation_id}).all()
    return (rows[0][0], [row[1] for row in rows]) if rows else None


def list_conversations(db: Database, user_id: int, limit: int = 200, query: str | None = None,
                       before: ConversationCursor | None = None) -> ConversationPage:
    """A page of the user's conversations, newest first (by last activity, then id); `query`: only those whose
    title or a user's or an agent's message contains it, ignoring case; `before`: those after that cursor."""
    with db.read() as s:
        rows = list(s.scalars(page_select(user_id, limit + 1, query, before)))
    page = rows[:limit]
    return ConversationPage(page, ConversationCursor.after(page[-1]) if len(rows) > limit else None)


def page_select(user_id: int, limit: int, query: str | None, before: ConversationCursor | None
                ) -> Select[Conversation]:
    """The statement of `list_conversations` (bench/conversation_pages.py shows its plan)."""
    stmt = select(Conversation).where(Conversation.user_id == user_id, Conversation.deleted_at.is_(None))
    if query:
        needle = query.lower()
        in_messages = exists().where(Message.conversation_id == Conversation.id,
                                     Message.role.in_(("user", "assistant")),
                                     func.lower(Message.content).contains(needle, autoescape=True))
        stmt = stmt.where(or_(func.lower(Conversation.title).contains(needle, autoescape=True), in_messages))
    if before is not None:
        # The first condition is implied by the second; it is the range that lets the database start its index
        # scan (ix_conversations_user_page) at the cursor instead of reading the user's newer rows to skip them.
        stmt = stmt.where(Conversation.updated_at <= before.updated_at,
                          or_(Conversation.updated_at < before.updated_at,
                              and_(Conversation.updated_at == before.updated_at,
                                   Conversation.id > before.conversation_id)))
    return stmt.order_by(Conversation.updated_at.desc(), Conversation.id).limit(limit)


def rename_conversation(db: Database, conversation_id: str, user_id: int, title: str) -> Conversation | None:
    """Set the title of the user's (not deleted) conversation; None when there is no such conversation."""
    with db.write() as s:
        done = rowcount(s.execute(update(Conversation).where(
            Conversation.id == conversation_id, Conversation.user_id == user_id, Conversation.deleted_at.is_(None))
            .values(title=title, updated_at=now())))
    return get_conversation(db, conversation_id, user_id) if done else None


def mark_deleted(db: Database, conversation_id: str, user_id: int) -> bool:
    """Hide the conversation from its user at once; False when it was not theirs or already deleted."""
    with db.write() as s:
        return bool(rowcount(s.execute(update(Conversation).where(
            Conversation.id == conversation_id, Conversation.user_id == user_id, Conversation.deleted_at.is_(None))
            .values(deleted_at=now()))))


def retire_agents(db: Database, conversation_id: str) -> list[str]:
    """Mark every agent of a deleted conversation terminated and discard their queues and its messages
    waiting for a route, in one transaction:
    no new turn can start for them (a turn's claim checks the mark). Returns their ids."""
    with db.write() as s:
        ids = list(s.scalars(select(Agent.id).where(Agent.conversation_id == conversation_id)))
        s.execute(update(Agent).where(Agent.conversation_id == conversation_id).values(terminated=True,
                                                                                      updated_at=now()))
        s.execute(update(PendingMessageRow).where(PendingMessageRow.conversation_id == conversation_id,
                                                  PendingMessageRow.status.in_((QUEUED, ROUTING)))
                  .values(status=CONSUMED, consumed_by="deleted", consumed_at=now()))
    return ids


def purge_conversation(db: Database, conversation_id: str) -> bool:
    """Remove every row of a deleted conversation, in one transaction; False (nothing removed) while one
    of its tasks or background commands is still active, or when it is not marked deleted."""
    with db.write() as s:
        conv = s.get(Conversation, conversation_id)
        if conv is None or conv.deleted_at is None:
            return False
        busy_task = s.scalar(select(Task.id).where(Task.conversation_id == conversation_id,
                                                   Task.status.in_(ACTIVE_STATUSES)).limit(1))
        busy_command = s.scalar(select(BackgroundCommand.id).where(
            BackgroundCommand.conversation_id == conversation_id,
            BackgroundCommand.status == CommandStatus.RUNNING).limit(1))
        if busy_task or busy_command:
            return False
        task_ids = select(Task.id).where(Task.conversation_id == conversation_id)
        s.execute(delete(TaskEvent).where(TaskEvent.task_id.in_(task_ids)))
        for table in (Task, Message, ContextSummary, PendingMessageRow, BackgroundCommand):
            s.execute(delete(table).where(table.conversation_id == conversation_id))
        s.execute(delete(SessionEntry).where(SessionEntry.key.like(f"{conversation_id}:%")))
        s.execute(delete(Agent).where(Agent.conversation_id == conversation_id))
        s.execute(delete(Conversation).where(Conversation.id == conversation_id))
    return True


def touch_conversation(db: Database, conversation_id: str, title: str | None = None) -> None:
    with db.write() as s:
        touch_conversation_in(s, conversation_id, title)


def touch_conversation_in(session: Session, conversation_id: str, title: str | None = None) -> None:
    """`touch_conversation` inside the caller's transaction (a send: with its held message)."""
    params = {"conversation": conversation_id, "at": now(), "new_title": title}
    session.execute(_TOUCH if title is None else _TOUCH_TITLED, params)

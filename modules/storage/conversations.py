"""Conversations and their agents' rows."""

from __future__ import annotations

from sqlalchemy import select, update

from modules.storage.db import Database
from modules.storage.models import Agent, Conversation
from modules.storage.records import new_id, now


def create_conversation(db: Database, user_id: int, title: str,
                        master_name: str = "MasterAgent") -> tuple[Conversation, Agent]:
    """A conversation is born with its master agent, idle."""
    ts = now()
    conv = Conversation(id=new_id(), user_id=user_id, title=title, created_at=ts, updated_at=ts)
    master = Agent(
        id=new_id(), conversation_id=conv.id, display_name=master_name, role=master_name,
        kind="master", parent_id=None, state="idle", version=0, created_at=ts, updated_at=ts,
    )
    with db.write() as s:
        s.add(conv)
        s.flush()
        s.add(master)
    return conv, master


def get_conversation(db: Database, conversation_id: str, user_id: int | None = None) -> Conversation | None:
    """The conversation, or None when it does not exist or belongs to another user."""
    with db.read() as s:
        conv = s.get(Conversation, conversation_id)
    if conv is None or (user_id is not None and conv.user_id != user_id):
        return None
    return conv


def list_conversations(db: Database, user_id: int, limit: int = 200) -> list[Conversation]:
    with db.read() as s:
        return list(s.scalars(
            select(Conversation).where(Conversation.user_id == user_id)
            .order_by(Conversation.updated_at.desc(), Conversation.id).limit(limit)
        ))


def touch_conversation(db: Database, conversation_id: str, title: str | None = None) -> None:
    values: dict = {"updated_at": now()}
    if title is not None:
        values["title"] = title
    with db.write() as s:
        s.execute(update(Conversation).where(Conversation.id == conversation_id).values(**values))

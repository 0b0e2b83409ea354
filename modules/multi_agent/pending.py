"""The records of routed messages: a queued message, a delivery's result, a blocked ask waiting for its
answer, and how a message reads in its receiver's history (modules/multi_agent/message_router.py routes them)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Row

from modules.statuses import Delivery, MessageSource, Visibility
from modules.storage.message_meta import MessageMeta
from modules.storage.messages import MessageDraft
from modules.storage.models import PendingMessageRow
from modules.storage.records import new_id, now

RESOLVED, INJECTED_INLINE, TRIGGERED_NEW_TURN = Delivery.RESOLVED, Delivery.INJECTED_INLINE, Delivery.TRIGGERED_NEW_TURN
QUEUED = Delivery.QUEUED  # stored, but the database went away before its delivery: a sweep delivers it
MESSAGE_TYPES = ("task", "output", "ask", "message", "answer", "notice")


class RouteError(ValueError):
    """The message cannot be delivered (unknown or terminated receiver)."""


@dataclass(frozen=True)
class PendingMessage:
    id: str
    conversation_id: str
    source_display_name: str
    source_agent_id: str | None
    target_agent_id: str
    type: str
    content: str
    question_id: str | None = None
    created_at: float = field(default_factory=now)
    meta: MessageMeta = field(default_factory=MessageMeta)

    @classmethod
    def new(cls, *, conversation_id: str, target_agent_id: str, type: str, content: str,
            source_display_name: str, source_agent_id: str | None = None, question_id: str | None = None,
            meta: MessageMeta | None = None, id: str | None = None) -> PendingMessage:
        if type not in MESSAGE_TYPES:
            raise ValueError(f"unknown message type {type!r}")
        return cls(id=id or new_id(), conversation_id=conversation_id, source_display_name=source_display_name,
                   source_agent_id=source_agent_id, target_agent_id=target_agent_id, type=type, content=content,
                   question_id=question_id, meta=meta or MessageMeta())

    @classmethod
    def from_row(cls, row: PendingMessageRow | Row[*tuple[Any, ...]]) -> PendingMessage:
        return cls(id=row.id, conversation_id=row.conversation_id, source_display_name=row.source_display_name,
                   source_agent_id=row.source_agent_id, target_agent_id=row.target_agent_id, type=row.type,
                   content=row.content, question_id=row.question_id, created_at=row.created_at,
                   meta=MessageMeta.load(row.meta))

    def row_values(self) -> dict[str, Any]:
        """Its `PendingMessageRow` columns, for the queue's batched insert."""
        return dict(
            id=self.id, conversation_id=self.conversation_id, target_agent_id=self.target_agent_id,
            source_agent_id=self.source_agent_id, source_display_name=self.source_display_name, type=self.type,
            content=self.content, question_id=self.question_id, meta=self.meta.dump(), created_at=self.created_at,
        )

    @property
    def source(self) -> MessageSource:
        """The `user_message` source: user, sub_agent, background_command, agent_message or guidance."""
        return self.meta.source or MessageSource.AGENT_MESSAGE


@dataclass(frozen=True)
class RouteResult:
    """`claimed`: a release that started its receiver's turn in its own transaction, and wrote the meta its
    caller gave for that case (`MessageRouter.release`)."""

    delivery: Delivery
    task_id: str | None = None
    claimed: bool = False


def history_text(msg: PendingMessage) -> str:
    """How a queued message reads in its receiver's history: who sent it, and the id to answer with."""
    if msg.source == MessageSource.USER and msg.meta.rewritten_query:
        return f"{msg.content}\n\n[Understood as: {msg.meta.rewritten_query}]"
    if msg.source in (MessageSource.USER, MessageSource.SUB_AGENT, MessageSource.BACKGROUND_COMMAND) \
            or msg.type == "task":
        return msg.content
    if msg.type == "ask":
        return (f"[Question {msg.question_id} from {msg.source_display_name}] {msg.content}\n"
                f"(Reply with your answer tool, question_id={msg.question_id}.)")
    if msg.type == "answer":
        return f"[Answer to {msg.question_id} from {msg.source_display_name}] {msg.content}"
    return f"[Message from {msg.source_display_name}] {msg.content}"


def history_draft(msg: PendingMessage, *, starts_work: bool) -> MessageDraft:
    meta = msg.meta.model_copy(update=dict(
        routed=None, source=msg.source, visibility=msg.meta.visibility or Visibility.CHAT, starts_work=starts_work,
        message_type=msg.type, from_agent=msg.source_display_name, question_id=msg.question_id or msg.meta.question_id))
    return MessageDraft(role="user", content=history_text(msg), meta=meta, message_id=msg.id)


@dataclass
class AskWaiter:
    """A blocked ask of one agent; resolved by the matching answer, or any message from the agent asked
    that was sent after the ask began (one sent before it, still queued, is not a reply to it)."""

    agent_id: str
    question_id: str
    asked_agent_id: str | None
    from_user: bool = False
    event: threading.Event = field(default_factory=threading.Event)
    answer: PendingMessage | None = None
    since: float = field(default_factory=now)
    closed: bool = False  # the ask has ended: an answer taken now must go back to the queue

    def matches(self, msg: PendingMessage) -> bool:
        if msg.type == "answer" and msg.question_id == self.question_id:
            return True
        if msg.created_at < self.since:
            return False
        if self.from_user:
            return msg.source == MessageSource.USER
        return self.asked_agent_id is not None and msg.source_agent_id == self.asked_agent_id

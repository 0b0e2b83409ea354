"""ORM tables. The schema itself is owned by the Alembic migrations next to this file.

Timestamps are epoch seconds as double precision: portable across SQLite,
PostgreSQL and MariaDB, and precise enough to order events that happen
milliseconds apart.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Double,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.dialects import mysql
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from modules.storage.message_meta import MessageMeta
from modules.storage.task_meta import TaskMeta

# MySQL's TEXT stops at 64 KiB; a long tool output or reply must not be cut.
LongText = Text().with_variant(mysql.LONGTEXT(), "mysql", "mariadb")


class Base(DeclarativeBase):
    pass


class User(Base):
    __tablename__ = "users"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    # Compared exactly on every database (MySQL's default collation ignores case and accents: migration 0010).
    name: Mapped[str] = mapped_column(
        String(128).with_variant(mysql.VARCHAR(128, charset="utf8mb4", collation="utf8mb4_bin"), "mysql", "mariadb"),
        unique=True)
    created_at: Mapped[float] = mapped_column(Double)


class Conversation(Base):
    __tablename__ = "conversations"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    title: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[float] = mapped_column(Double)
    updated_at: Mapped[float] = mapped_column(Double)
    deleted_at: Mapped[float | None] = mapped_column(Double, nullable=True)  # set: gone for its user


# The list's keyset pages (conversation_pages.py): one user's rows in page order, read from the cursor on
# (migration 0014; it replaced an index of `updated_at` alone, which only this list had used).
Index("ix_conversations_user_page", Conversation.user_id, Conversation.updated_at.desc(), Conversation.id)


class Agent(Base):
    __tablename__ = "agents"
    __table_args__ = (UniqueConstraint("conversation_id", "display_name"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    conversation_id: Mapped[str] = mapped_column(ForeignKey("conversations.id"), index=True)
    display_name: Mapped[str] = mapped_column(String(128))
    role: Mapped[str] = mapped_column(String(128))
    kind: Mapped[str] = mapped_column(String(16))
    parent_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    state: Mapped[str] = mapped_column(String(16), index=True)
    version: Mapped[int] = mapped_column(Integer, default=0)
    task: Mapped[str | None] = mapped_column(LongText, nullable=True)
    terminated: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    created_at: Mapped[float] = mapped_column(Double)
    updated_at: Mapped[float] = mapped_column(Double)


class Message(Base):
    """One entry of one agent's history; `seq` orders it within that agent."""

    __tablename__ = "messages"
    __table_args__ = (UniqueConstraint("agent_id", "seq"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    message_id: Mapped[str] = mapped_column(String(64), unique=True)
    conversation_id: Mapped[str] = mapped_column(ForeignKey("conversations.id"), index=True)
    agent_id: Mapped[str] = mapped_column(ForeignKey("agents.id"))
    seq: Mapped[int] = mapped_column(Integer)
    role: Mapped[str] = mapped_column(String(16))
    content: Mapped[str | None] = mapped_column(LongText, nullable=True)
    tool_calls: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON, nullable=True)
    tool_call_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    name: Mapped[str | None] = mapped_column(String(128), nullable=True)
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", JSON)
    created_at: Mapped[float] = mapped_column(Double)

    @property
    def typed_meta(self) -> MessageMeta:
        """`meta`, parsed (modules/storage/message_meta.py)."""
        return MessageMeta.load(self.meta)


class ContextSummary(Base):
    """What an agent's model sees in place of its history up to `through_seq` (the history stays whole)."""

    __tablename__ = "context_summaries"
    __table_args__ = (Index("ix_context_summaries_agent", "agent_id", "id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    summary_id: Mapped[str] = mapped_column(String(36), unique=True)
    conversation_id: Mapped[str] = mapped_column(ForeignKey("conversations.id"), index=True)
    agent_id: Mapped[str] = mapped_column(ForeignKey("agents.id"))
    through_seq: Mapped[int] = mapped_column(Integer)
    content: Mapped[str] = mapped_column(LongText)
    summarised_messages: Mapped[int] = mapped_column(Integer)
    tokens_before: Mapped[int] = mapped_column(Integer)
    tokens_after: Mapped[int] = mapped_column(Integer)
    model: Mapped[str] = mapped_column(String(128))
    task_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    created_at: Mapped[float] = mapped_column(Double)


class Task(Base):
    __tablename__ = "tasks"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    conversation_id: Mapped[str] = mapped_column(ForeignKey("conversations.id"), index=True)
    agent_id: Mapped[str] = mapped_column(ForeignKey("agents.id"), index=True)
    task_type: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(16), index=True)
    trigger_message_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    error: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    meta: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)  # a TaskMeta
    owner: Mapped[str | None] = mapped_column(String(36), nullable=True)
    stop_requested: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    created_at: Mapped[float] = mapped_column(Double)
    started_at: Mapped[float | None] = mapped_column(Double, nullable=True)
    finished_at: Mapped[float | None] = mapped_column(Double, nullable=True)


    @property
    def typed_meta(self) -> TaskMeta:
        """`meta`, parsed (modules/storage/task_meta.py)."""
        return TaskMeta.load(self.meta)

class TaskEvent(Base):
    """The durable, per-task numbered event log that REST clients poll with `?from=`."""

    __tablename__ = "task_events"
    __table_args__ = (UniqueConstraint("task_id", "idx"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    task_id: Mapped[str] = mapped_column(ForeignKey("tasks.id"))
    idx: Mapped[int] = mapped_column(Integer)
    type: Mapped[str] = mapped_column(String(64))
    data: Mapped[dict[str, Any]] = mapped_column(JSON)
    ts: Mapped[float] = mapped_column(Double)


class SessionEntry(Base):
    __tablename__ = "session_store"

    key: Mapped[str] = mapped_column(String(191), primary_key=True)
    field: Mapped[str] = mapped_column(String(191), primary_key=True)
    value: Mapped[Any] = mapped_column(JSON, nullable=True)
    updated_at: Mapped[float] = mapped_column(Double)


class ClientRequest(Base):
    """The first answer to a `client_message_id`, so a retried send is stored once."""

    __tablename__ = "client_requests"

    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), primary_key=True)
    # Compared exactly on every database, as the user's names are (migration 0011).
    client_message_id: Mapped[str] = mapped_column(
        String(128).with_variant(mysql.VARCHAR(128, charset="utf8mb4", collation="utf8mb4_bin"), "mysql", "mariadb"),
        primary_key=True)
    response: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[float] = mapped_column(Double)


class PendingMessageRow(Base):
    """One entry of an agent's durable queue; `seq` is the global arrival order."""

    __tablename__ = "pending_messages"
    __table_args__ = (Index("ix_pending_target_status", "target_agent_id", "status", "seq"),
                      Index("ix_pending_status", "status"))

    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    id: Mapped[str] = mapped_column(String(64), unique=True)
    conversation_id: Mapped[str] = mapped_column(ForeignKey("conversations.id"))
    target_agent_id: Mapped[str] = mapped_column(ForeignKey("agents.id"))
    source_agent_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    source_display_name: Mapped[str] = mapped_column(String(128))
    type: Mapped[str] = mapped_column(String(16))
    content: Mapped[str] = mapped_column(LongText)
    question_id: Mapped[str | None] = mapped_column(String(64), nullable=True, index=True)
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", JSON)
    status: Mapped[str] = mapped_column(String(16))
    consumed_by: Mapped[str | None] = mapped_column(String(64), nullable=True)
    created_at: Mapped[float] = mapped_column(Double)
    consumed_at: Mapped[float | None] = mapped_column(Double, nullable=True)
    # While `routing`: the server process whose routing inbox routes it (modules/storage/unrouted.py).
    routing_process: Mapped[str | None] = mapped_column(String(36), nullable=True)

    @property
    def typed_meta(self) -> MessageMeta:
        """`meta`, parsed (modules/storage/message_meta.py)."""
        return MessageMeta.load(self.meta)


class BackgroundCommand(Base):
    __tablename__ = "background_commands"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    conversation_id: Mapped[str] = mapped_column(ForeignKey("conversations.id"), index=True)
    agent_id: Mapped[str] = mapped_column(ForeignKey("agents.id"))
    command: Mapped[str] = mapped_column(LongText)
    status: Mapped[str] = mapped_column(String(16), index=True)
    exit_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    output_tail: Mapped[str | None] = mapped_column(LongText, nullable=True)
    output_truncated: Mapped[bool] = mapped_column(Boolean, default=False)
    timeout_s: Mapped[float] = mapped_column(Double)
    pid: Mapped[int | None] = mapped_column(Integer, nullable=True)
    pid_started: Mapped[int | None] = mapped_column(BigInteger, nullable=True)  # clock ticks after boot
    log_path: Mapped[str] = mapped_column(String(512))
    owner: Mapped[str | None] = mapped_column(String(36), nullable=True)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    error: Mapped[str | None] = mapped_column(String(512), nullable=True)
    created_at: Mapped[float] = mapped_column(Double)
    finished_at: Mapped[float | None] = mapped_column(Double, nullable=True)


class ForegroundCommand(Base):
    """A foreground command while it runs (modules/foreground_commands.py): counted by the per-user cap, removed
    when it ends or when its process is forgotten as gone. No foreign key: a conversation deleted meanwhile does
    not wait for the row."""

    __tablename__ = "foreground_commands"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    conversation_id: Mapped[str] = mapped_column(String(36), index=True)
    agent_id: Mapped[str] = mapped_column(String(36))
    owner: Mapped[str | None] = mapped_column(String(36), nullable=True, index=True)
    created_at: Mapped[float] = mapped_column(Double)


class ServerProcess(Base):
    """A running server process; its heartbeat tells the others whether its work is still in hand."""

    __tablename__ = "server_processes"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    host: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[float] = mapped_column(Double)
    heartbeat_at: Mapped[float] = mapped_column(Double, index=True)


class ModelUsage(Base):
    """One model request in the usage ledger (docs/API.md, "Usage"): tokens as the provider reported them,
    or an estimate (`estimated`). No foreign keys: the ledger outlives a deleted conversation."""

    __tablename__ = "model_usage"
    __table_args__ = (Index("ix_model_usage_user_created", "user_id", "created_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    conversation_id: Mapped[str | None] = mapped_column(String(36), nullable=True, index=True)
    task_id: Mapped[str | None] = mapped_column(String(36), nullable=True, index=True)
    agent_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    agent: Mapped[str] = mapped_column(String(128))
    purpose: Mapped[str] = mapped_column(String(32))
    model: Mapped[str] = mapped_column(String(128))
    status: Mapped[str] = mapped_column(String(16))
    estimated: Mapped[bool] = mapped_column(Boolean)
    prompt_tokens: Mapped[int] = mapped_column(Integer)
    completion_tokens: Mapped[int] = mapped_column(Integer)
    cached_tokens: Mapped[int] = mapped_column(Integer)
    reasoning_tokens: Mapped[int] = mapped_column(Integer)
    cost: Mapped[float | None] = mapped_column(Double, nullable=True)
    latency_s: Mapped[float] = mapped_column(Double)
    first_token_s: Mapped[float | None] = mapped_column(Double, nullable=True)
    created_at: Mapped[float] = mapped_column(Double)

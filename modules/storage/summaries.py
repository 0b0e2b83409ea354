"""Context summaries of agent histories: the newest one of an agent is what its model sees in place of
every history entry up to its `through_seq` (README, "Long conversations")."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import bindparam, insert, select

from modules.storage.db import Database
from modules.storage.models import ContextSummary
from modules.storage.records import new_id, now


@dataclass(frozen=True)
class Summary:
    summary_id: str
    through_seq: int  # the last history `seq` it stands for
    content: str
    summarised_messages: int  # history entries this summary newly took in
    tokens_before: int  # the model's view before and after this summary (estimated tokens)
    tokens_after: int
    created_at: float = 0.0


@dataclass(frozen=True)
class SummaryDraft:
    conversation_id: str
    agent_id: str
    through_seq: int
    content: str
    summarised_messages: int
    tokens_before: int
    tokens_after: int
    model: str
    task_id: str | None = None


# Read before every model request: built once (modules/storage/agents.py says why).
_LATEST = select(ContextSummary.summary_id, ContextSummary.through_seq, ContextSummary.content,
                 ContextSummary.summarised_messages, ContextSummary.tokens_before, ContextSummary.tokens_after) \
    .where(ContextSummary.agent_id == bindparam("agent")).order_by(ContextSummary.id.desc()).limit(1)


def latest(db: Database, agent_id: str) -> Summary | None:
    """The agent's newest summary: one indexed row, however long the history."""
    with db.read() as s:
        row = s.execute(_LATEST, {"agent": agent_id}).first()
    return None if row is None else Summary(*row)


def add(db: Database, draft: SummaryDraft) -> Summary:
    summary_id, created_at = new_id(), now()
    with db.write() as s:
        s.execute(insert(ContextSummary), [dict(
            summary_id=summary_id, conversation_id=draft.conversation_id, agent_id=draft.agent_id,
            through_seq=draft.through_seq, content=draft.content, summarised_messages=draft.summarised_messages,
            tokens_before=draft.tokens_before, tokens_after=draft.tokens_after, model=draft.model[:128],
            task_id=draft.task_id, created_at=created_at)])
    return Summary(summary_id, draft.through_seq, draft.content, draft.summarised_messages,
                   draft.tokens_before, draft.tokens_after, created_at)


def list_for_agent(db: Database, agent_id: str) -> list[Summary]:
    """Every summary of the agent, oldest first (what the UI shows behind "earlier messages summarised")."""
    with db.read() as s:
        rows = s.execute(
            select(ContextSummary.summary_id, ContextSummary.through_seq, ContextSummary.content,
                   ContextSummary.summarised_messages, ContextSummary.tokens_before, ContextSummary.tokens_after,
                   ContextSummary.created_at)
            .where(ContextSummary.agent_id == agent_id).order_by(ContextSummary.id)
        ).all()
    return [Summary(*row) for row in rows]

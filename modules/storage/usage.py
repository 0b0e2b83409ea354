"""The usage ledger's SQL (docs/API.md, "Usage and budgets"): sums by conversation, by day, since a moment.

Rows are inserted through the group commit (modules/usage/ledger.py), with the turn's own writes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, select

from modules.event_catalogue import UsageSums
from modules.storage.db import Database
from modules.storage.models import Conversation, ModelUsage

DAY_S = 86400


@dataclass
class UsageTotals:
    """Sums over ledger rows: the fields of every usage answer. `cost` is None while no summed row had a
    price; `estimated` counts the requests whose tokens were estimated (the provider reported none)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    requests: int = 0
    estimated: int = 0
    cost: float | None = None

    def add(self, prompt: int, completion: int, cached: int, reasoning: int, requests: int, estimated: int,
            cost: float | None) -> None:
        self.prompt_tokens += prompt
        self.completion_tokens += completion
        self.cached_tokens += cached
        self.reasoning_tokens += reasoning
        self.requests += requests
        self.estimated += estimated
        if cost is not None:
            self.cost = (self.cost or 0.0) + cost

    def merge(self, other: UsageTotals) -> None:
        self.add(other.prompt_tokens, other.completion_tokens, other.cached_tokens, other.reasoning_tokens,
                 other.requests, other.estimated, other.cost)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def as_dict(self) -> UsageSums:
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "cached_tokens": self.cached_tokens, "reasoning_tokens": self.reasoning_tokens,
                "requests": self.requests, "estimated": self.estimated,
                "cost": None if self.cost is None else round(self.cost, 8)}


@dataclass
class UsageBreakdown:
    """A conversation's usage: its totals and the same sums by agent, by purpose and by model."""

    totals: UsageTotals = field(default_factory=UsageTotals)
    by_agent: dict[str, UsageTotals] = field(default_factory=dict)
    by_purpose: dict[str, UsageTotals] = field(default_factory=dict)
    by_model: dict[str, UsageTotals] = field(default_factory=dict)
    by_task: dict[str, UsageTotals] = field(default_factory=dict)  # a turn's requests (stages have no task)


def _sums() -> tuple[Any, ...]:
    u = ModelUsage
    return (func.coalesce(func.sum(u.prompt_tokens), 0), func.coalesce(func.sum(u.completion_tokens), 0),
            func.coalesce(func.sum(u.cached_tokens), 0), func.coalesce(func.sum(u.reasoning_tokens), 0),
            func.count(u.id), func.coalesce(func.sum(func.cast(u.estimated, ModelUsage.prompt_tokens.type)), 0),
            func.sum(u.cost))


def _totals(row: Iterable[Any]) -> UsageTotals:
    prompt, completion, cached, reasoning, requests, estimated, cost = row
    totals = UsageTotals()
    totals.add(int(prompt), int(completion), int(cached), int(reasoning), int(requests), int(estimated),
               None if cost is None else float(cost))
    return totals


def conversation_usage(db: Database, conversation_id: str) -> UsageBreakdown:
    u = ModelUsage
    with db.read() as s:
        rows = s.execute(select(u.agent, u.purpose, u.model, u.task_id, *_sums())
                         .where(u.conversation_id == conversation_id)
                         .group_by(u.agent, u.purpose, u.model, u.task_id)).all()
    out = UsageBreakdown()
    for agent, purpose, model, task_id, *sums in rows:
        part = _totals(sums)
        out.totals.merge(part)
        for key, groups in ((agent, out.by_agent), (purpose, out.by_purpose), (model, out.by_model),
                            (task_id, out.by_task)):
            if key is not None:
                groups.setdefault(key, UsageTotals()).merge(part)
    return out


def task_usage(db: Database, task_id: str) -> UsageTotals:
    with db.read() as s:
        return _totals(s.execute(select(*_sums()).where(ModelUsage.task_id == task_id)).one())


def user_usage_since(db: Database, user_id: int, since: float) -> UsageTotals:
    """What the user's requests used from `since` on (a budget's period)."""
    u = ModelUsage
    with db.read() as s:
        return _totals(s.execute(select(*_sums()).where(u.user_id == user_id, u.created_at >= since)).one())


def user_usage_by_day(db: Database, user_id: int, start: float, end: float) -> dict[int, UsageTotals]:
    """The user's usage in [start, end), by UTC day (days since the epoch); days without requests absent.
    Summed here by day over the rows' few columns, the same way on every database."""
    u = ModelUsage
    days: dict[int, UsageTotals] = {}
    with db.read() as s:
        rows = s.execute(select(u.created_at, u.prompt_tokens, u.completion_tokens, u.cached_tokens,
                                u.reasoning_tokens, u.estimated, u.cost)
                         .where(u.user_id == user_id, u.created_at >= start, u.created_at < end))
        for created, prompt, completion, cached, reasoning, estimated, cost in rows:
            days.setdefault(int(created // DAY_S), UsageTotals()).add(
                prompt, completion, cached, reasoning, 1, int(bool(estimated)), cost)
    return days


def user_of_conversation(db: Database, conversation_id: str) -> int | None:
    with db.read() as s:
        return s.scalar(select(Conversation.user_id).where(Conversation.id == conversation_id))

"""`/api/conversations/<cid>/usage` and `/api/usage`: what the caller's model requests used
(docs/API.md, "Usage and budgets"), from the usage ledger."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from flask import Blueprint

from modules.storage import usage as usage_store
from modules.storage.usage import DAY_S, UsageTotals
from server.api import response_models as out
from server.api.context import owned_conversation, runtime
from server.api.endpoint import endpoint
from server.api.request_models import UsageQuery
from server.errors import ApiError

bp = Blueprint("usage", __name__, url_prefix="/api")

MAX_DAYS = 366
DEFAULT_DAYS = 30


def sums(totals: UsageTotals) -> out.UsageSums:
    return out.UsageSums.model_validate(totals.as_dict())


@bp.get("/conversations/<conversation_id>/usage")
@endpoint({200: out.ConversationUsage}, errors=(404,))
def conversation_usage(conversation_id: str, user_id: int) -> out.ConversationUsage:
    """The conversation's usage: totals, by agent, by purpose, by model."""
    conv = owned_conversation(conversation_id, user_id)
    runtime().ledger.flush()  # this process's rows still deferred are part of the answer
    found = usage_store.conversation_usage(runtime().db, conv.id)
    return out.ConversationUsage(
        conversation_id=conv.id, totals=sums(found.totals),
        by_agent={k: sums(v) for k, v in sorted(found.by_agent.items())},
        by_purpose={k: sums(v) for k, v in sorted(found.by_purpose.items())},
        by_model={k: sums(v) for k, v in sorted(found.by_model.items())},
        by_task={k: sums(v) for k, v in found.by_task.items()})


@bp.get("/usage")
@endpoint({200: out.UserUsage}, errors=(400,), query=UsageQuery)
def user_usage(query: UsageQuery, user_id: int) -> out.UserUsage:
    """The caller's usage by UTC day, `from` to `to` (both included; at most 366 days)."""
    end = query.end or datetime.now(UTC).date()
    # The default span starts no earlier than the calendar does (`to=0001-01-01` must not overflow).
    start = query.start or date.fromordinal(max(1, end.toordinal() - (DEFAULT_DAYS - 1)))
    if start > end or (end - start).days >= MAX_DAYS:
        raise ApiError(400, "invalid_range", f"`from` must be a day before or equal to `to`, at most {MAX_DAYS} "
                                             "days apart")
    runtime().ledger.flush()
    first = _epoch_day(start)
    days = usage_store.user_usage_by_day(runtime().db, user_id, first * DAY_S, (_epoch_day(end) + 1) * DAY_S)
    totals = UsageTotals()
    listed = []
    for day in sorted(days):
        totals.merge(days[day])
        listed.append(out.UsageDay.model_validate(
            {**days[day].as_dict(), "day": (date(1970, 1, 1) + timedelta(days=day)).isoformat()}))
    return out.UserUsage.model_validate({"from": start.isoformat(), "to": end.isoformat(), "totals": sums(totals),
                                         "days": listed})


def _epoch_day(day: date) -> int:
    return (day - date(1970, 1, 1)).days

"""Per-user budgets (BUDGET_TOKENS_PER_DAY, ..._PER_MONTH, BUDGET_COST_PER_DAY, ..._PER_MONTH).

Each user has each configured budget for themselves, over the current UTC day or month. The database
is the source of truth (the ledger of every process), so a limit holds across processes: a check reads
the user's sums since the period began. A user at or over a limit is refused new sends (429
`budget_exceeded`, with when the period resets), and a running turn ends after its current round.
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from modules.storage import usage as usage_store
from modules.storage.db import Database

Kind = Literal["tokens", "cost"]
Period = Literal["day", "month"]
TOKENS: Kind = "tokens"
COST: Kind = "cost"
DAY: Period = "day"
MONTH: Period = "month"


@dataclass(frozen=True)
class Budget:
    kind: Kind  # tokens: prompt + completion; cost: by the price table
    period: Period
    limit: float


@dataclass(frozen=True)
class BudgetExceeded:
    """The first budget the user has used up: what, how much, and when its period starts again."""

    budget: Budget
    used: float
    resets_at: float  # epoch seconds

    @property
    def message(self) -> str:
        unit = "tokens" if self.budget.kind == TOKENS else "cost"
        when = datetime.fromtimestamp(self.resets_at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return (f"the {self.budget.period}'s budget of {self.budget.limit:g} {unit} is used up "
                f"({self.used:g}); it resets at {when}")


def period_bounds(period: str, at: float) -> tuple[float, float]:
    """The UTC day or month containing `at`: (start, end) in epoch seconds."""
    moment = datetime.fromtimestamp(at, UTC)
    if period == DAY:
        start = moment.replace(hour=0, minute=0, second=0, microsecond=0)
        return start.timestamp(), start.timestamp() + 86400
    start = moment.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    days = calendar.monthrange(start.year, start.month)[1]
    return start.timestamp(), start.timestamp() + days * 86400


class Budgets:
    def __init__(self, db: Database, budgets: list[Budget], *, flush: Callable[[], None] = lambda: None,
                 clock: Callable[[], float] = time.time):
        self._db, self.budgets, self._flush, self._clock = db, budgets, flush, clock

    @property
    def active(self) -> bool:
        return bool(self.budgets)

    def exceeded(self, user_id: int | None) -> BudgetExceeded | None:
        """The user's budget used up now that resets last (a day's and the month's both used up: the month's, since
        past midnight the month's still refuses), or None (also with no budgets set)."""
        if not self.budgets or user_id is None:
            return None
        self._flush()  # this process's rows still deferred count too
        at = self._clock()
        sums: dict[str, usage_store.UsageTotals] = {}
        found: BudgetExceeded | None = None
        for budget in self.budgets:
            start, end = period_bounds(budget.period, at)
            if budget.period not in sums:
                sums[budget.period] = usage_store.user_usage_since(self._db, user_id, start)
            totals = sums[budget.period]
            used = float(totals.total_tokens) if budget.kind == TOKENS else (totals.cost or 0.0)
            if used >= budget.limit and (found is None or end > found.resets_at):
                found = BudgetExceeded(budget, used, end)
        return found


def budgets_from(*, tokens_per_day: float | None, tokens_per_month: float | None, cost_per_day: float | None,
                 cost_per_month: float | None) -> list[Budget]:
    """The configured budgets (README, "Configuration"), day before month."""
    pairs: list[tuple[Kind, Period, float | None]] = [
        (TOKENS, DAY, tokens_per_day), (COST, DAY, cost_per_day),
        (TOKENS, MONTH, tokens_per_month), (COST, MONTH, cost_per_month)]
    return [Budget(kind, period, limit) for kind, period, limit in pairs if limit is not None]

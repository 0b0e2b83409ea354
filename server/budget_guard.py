"""A send (or a regenerate) by a user who used up a budget answers 429 `budget_exceeded` with when it
resets, before anything is stored (docs/API.md, "Usage and budgets")."""

from __future__ import annotations

from modules.usage.budgets import Budgets
from server.errors import ApiError


def refuse_over_budget(budgets: Budgets, user_id: int) -> None:
    over = budgets.exceeded(user_id)
    if over is not None:
        raise ApiError(429, "budget_exceeded", over.message, details={
            "resets_at": over.resets_at, "budget": {"kind": over.budget.kind, "period": over.budget.period,
                                                    "limit": over.budget.limit, "used": over.used}})

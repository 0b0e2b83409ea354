"""A send (or a regenerate) by a user who used up a budget answers 429 `budget_exceeded` with when it
resets, before anything is stored (docs/API.md, "Usage and budgets")."""

from __future__ import annotations

from modules.domain_errors import OverBudget
from modules.usage.budgets import Budgets


def refuse_over_budget(budgets: Budgets, user_id: int) -> None:
    over = budgets.exceeded(user_id)
    if over is not None:
        raise OverBudget(over)

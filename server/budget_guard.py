"""A send (or a regenerate) by a user who used up a budget answers 429 `budget_exceeded` with when it
resets, before anything is stored (docs/API.md, "Usage and budgets")."""

from __future__ import annotations

from modules.domain_errors import OverBudget
from modules.usage.budgets import BudgetExceeded, Budgets
from modules.usage.ledger import UsageLedger


def refuse_over_budget(budgets: Budgets, user_id: int) -> None:
    over = budgets.exceeded(user_id)
    if over is not None:
        raise OverBudget(over)


def conversation_over_budget(budgets: Budgets, ledger: UsageLedger, conversation_id: str) -> BudgetExceeded | None:
    """The used-up budget of the conversation's user (a turn ends, a queue waits, no suggestions are asked), or
    None; without budgets, no read of who the user is."""
    return budgets.exceeded(ledger.user_of(conversation_id)) if budgets.active else None

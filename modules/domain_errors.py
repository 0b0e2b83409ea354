"""What the domain refuses, as exceptions of its own: the domain names the refusal (`code`, a message, the
body's other fields); HTTP statuses are the edges' business, mapped in one place (`server/errors.py`: REST's
error handler and the socket's acknowledgements use the same table)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from modules.usage.budgets import BudgetExceeded


class DomainError(Exception):
    """A request the domain refuses; `code` is what clients read (docs/API.md, "Errors")."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code, self.message = code, message

    def details(self) -> dict[str, Any]:
        """The error body's fields beyond `success`, `error` and `code` (none unless a kind has more)."""
        return {}


class Conflict(DomainError):
    """The request contradicts the current state (a question that is no longer pending, a task that ended)."""


class NotFound(DomainError):
    """What the request names does not exist, or is not the caller's (one answer for both)."""

    def __init__(self, what: str = "resource"):
        super().__init__("not_found", f"{what} not found")


class Unauthorized(DomainError):
    """The caller did not say who they are, or said it with a token the server does not know."""

    def __init__(self, message: str):
        super().__init__("unauthorized", message)


class RateLimited(DomainError):
    """The caller sent more than a per-minute limit allows; `retry_after_s` until it may again."""

    def __init__(self, message: str, retry_after_s: int):
        super().__init__("rate_limited", message)
        self.retry_after_s = retry_after_s  # the edges send it as `retry_after_s` and `Retry-After`


class OverBudget(DomainError):
    """The caller used up a budget: which, how much, and when its period starts again."""

    def __init__(self, exceeded: BudgetExceeded):
        super().__init__("budget_exceeded", exceeded.message)
        self.exceeded = exceeded

    def details(self) -> dict[str, Any]:
        over = self.exceeded
        return {"resets_at": over.resets_at, "budget": {"kind": over.budget.kind, "period": over.budget.period,
                                                        "limit": over.budget.limit, "used": over.used}}

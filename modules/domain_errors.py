"""What the domain refuses, as exceptions of its own: the domain names the refusal (`code`, a message);
HTTP statuses are the edges' business, mapped in one place each (`server/errors.py`: REST's error handler
and the socket's acknowledgements use the same table)."""

from __future__ import annotations


class DomainError(Exception):
    """A request the domain refuses; `code` is what clients read (docs/API.md, "Errors")."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code, self.message = code, message


class Conflict(DomainError):
    """The request contradicts the current state (a question that is no longer pending, say)."""

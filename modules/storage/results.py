"""What a write statement reports back. `Session.execute` is typed as returning a `Result`, which has no
`rowcount`; an INSERT, UPDATE or DELETE always answers with the `CursorResult` that has it."""

from __future__ import annotations

from typing import Any

from sqlalchemy import CursorResult, Result


def rowcount(result: Result[Any]) -> int:
    """The rows the statement matched; a non-cursor result (a SELECT's, by mistake) is a programming error."""
    if not isinstance(result, CursorResult):
        raise TypeError(f"rowcount of a {type(result).__name__}, not of a write statement's CursorResult")
    return result.rowcount

"""The `meta` of a task row: the messages its turn started on and whether they were all the user's, declared
once (docs/ARCHITECTURE.md, "Events, statuses and meta").

The database keeps it as a JSON object (`tasks.meta`); storage writes `dump()` and reads `Task.typed_meta`, so
the turn manager and recovery read fields, never dictionary keys. A task written without one (an older row,
a test's) reads as started on nothing, not from the user.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class TaskMeta(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    message_ids: list[str] = Field(default_factory=list)  # the drained queue, its trigger last
    from_user: bool = False  # a turn on the user's messages (no completion notice to a parent at its end)

    @classmethod
    def load(cls, raw: dict[str, Any] | None) -> TaskMeta:
        """The meta of a stored JSON object (None for a row written without one)."""
        return cls.model_validate(raw or {})

    def dump(self) -> dict[str, Any]:
        """The JSON object to store."""
        return self.model_dump(mode="json")

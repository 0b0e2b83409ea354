"""Versions of a turn (docs/API.md, "Versions of a turn"): Regenerate and Edit add a new version of a user's
turn; the older one stays in the stored history, readable in the UI, and the model sees only the newest.

A version's first message carries `version_of` (the message id of the turn's first version) and
`replaces_from_seq` (the history `seq` of the version it replaces): what lies between that seq and the new
version (the older version and anything that followed it) leaves the model's view."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

from modules.storage.message_meta import MessageMeta


class Versioned(Protocol):
    @property
    def seq(self) -> int: ...

    @property
    def replaces_from(self) -> int | None: ...


R = TypeVar("R", bound=Versioned)


def version_meta(replaced_id: str, replaced_seq: int, replaced_meta: MessageMeta) -> dict[str, Any]:
    """The meta fields that make a new user message a version of the turn whose message it replaces."""
    root = replaced_meta.version_of or replaced_meta.regenerate_of or replaced_id
    return {"version_of": root, "replaces_from_seq": replaced_seq}


def current_versions(rows: Sequence[R]) -> list[R]:
    """The rows without the superseded versions: each version drops the seqs from the one it replaces up to
    itself. Rows come in seq order; the ranges are few (one per edit or regenerate)."""
    spans = [(r.replaces_from, r.seq) for r in rows if r.replaces_from is not None]
    if not spans:
        return list(rows)
    return [r for r in rows if not any(lo <= r.seq < hi for lo, hi in spans)]

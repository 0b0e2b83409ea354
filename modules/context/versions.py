"""Versions of a turn (docs/API.md, "Versions of a turn"): Regenerate and Edit add a new version of a user's
turn; the older one stays in the stored history, readable in the UI, and the model sees only the newest.

A version's first message carries `version_of` (the message id of the turn's first version) and
`replaces_from_seq` (the history `seq` of the version it replaces): what lies between that seq and the new
version (the older version and anything that followed it) leaves the model's view."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

VERSION_OF = "version_of"
REPLACES_FROM = "replaces_from_seq"


class Versioned(Protocol):
    @property
    def seq(self) -> int: ...

    @property
    def replaces_from(self) -> int | None: ...


R = TypeVar("R", bound=Versioned)


def version_meta(replaced_id: str, replaced_seq: int, replaced_meta: dict[str, Any] | None) -> dict[str, Any]:
    """The metadata that makes a new user message a version of the turn whose message it replaces."""
    meta = replaced_meta or {}
    root = meta.get(VERSION_OF) or meta.get("regenerate_of") or replaced_id
    return {VERSION_OF: root, REPLACES_FROM: replaced_seq}


def replaces_from(meta: dict[str, Any] | None) -> int | None:
    value = (meta or {}).get(REPLACES_FROM)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def current_versions(rows: Sequence[R]) -> list[R]:
    """The rows without the superseded versions: each version drops the seqs from the one it replaces up to
    itself. Rows come in seq order; the ranges are few (one per edit or regenerate)."""
    spans = [(r.replaces_from, r.seq) for r in rows if r.replaces_from is not None]
    if not spans:
        return list(rows)
    return [r for r in rows if not any(lo <= r.seq < hi for lo, hi in spans)]

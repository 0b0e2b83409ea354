"""Keyset pages of a user's conversation list (docs/API.md, `GET /api/conversations`).

The list is ordered by last activity (`updated_at` descending, then `id`); a page ends with a cursor naming
its last conversation by both, so the next page starts right after it whatever was created or touched
meanwhile: no conversation appears twice, and none that kept its place is skipped (one touched meanwhile
moves to the top, where a fresh first page shows it).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from dataclasses import dataclass

from modules.storage.models import Conversation

MAX_CURSOR_ID_CHARS = 64


@dataclass(frozen=True)
class ConversationCursor:
    """Where a page of the list ended: its last conversation's `updated_at` and id."""

    updated_at: float
    conversation_id: str

    def encode(self) -> str:
        """Opaque to clients: URL-safe base64 of `[updated_at, id]` (a float's JSON text round-trips exactly)."""
        raw = json.dumps([self.updated_at, self.conversation_id], separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")

    @classmethod
    def decode(cls, text: str) -> ConversationCursor:
        """The cursor `encode` wrote; ValueError for anything else."""
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
            value = json.loads(raw)
        except (binascii.Error, ValueError, RecursionError):  # (a UnicodeDecodeError is a ValueError)
            raise ValueError("not a cursor of this list") from None
        if not (isinstance(value, list) and len(value) == 2 and _timestamp(value[0]) and _conversation_id(value[1])):
            raise ValueError("not a cursor of this list")
        return cls(float(value[0]), value[1])

    @classmethod
    def after(cls, conv: Conversation) -> ConversationCursor:
        return cls(conv.updated_at, conv.id)


def _timestamp(value: object) -> bool:
    return isinstance(value, float) and math.isfinite(value) or isinstance(value, int) and not isinstance(
        value, bool) and abs(value) < 2**53


def _conversation_id(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_CURSOR_ID_CHARS and value.isascii() \
        and value.isprintable()


@dataclass(frozen=True)
class ConversationPage:
    conversations: list[Conversation]
    next_cursor: ConversationCursor | None  # None on the last page

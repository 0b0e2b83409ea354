"""Shortening a long text for the model's view: its head and tail kept, the middle replaced by a marker
that says how much was left out (the stored text stays whole)."""

from __future__ import annotations

from modules.llm.tokens import count_tokens

MARKER = "\n[… {omitted} characters omitted from the middle to fit the context window …]\n"


def shorten_chars(text: str, max_chars: int) -> str:
    """`text` if it fits in `max_chars`, else its first and last parts around a marker (within max_chars)."""
    if len(text) <= max_chars:
        return text
    keep = max(0, max_chars - len(MARKER.format(omitted=len(text))))
    head = keep * 2 // 3  # the head says what the output is about; the tail how it ended
    tail = keep - head
    return text[:head] + MARKER.format(omitted=len(text) - head - tail) + (text[-tail:] if tail else "")


def shorten_tokens(text: str, max_tokens: int) -> str:
    """`text` shortened until it counts at most `max_tokens` (modules/llm/tokens.py's estimate decides)."""
    tokens = count_tokens(text)
    if tokens <= max_tokens:
        return text
    chars = int(len(text) * max_tokens / tokens * 0.95)
    while True:
        out = shorten_chars(text, max(chars, 0))
        if chars <= 0 or count_tokens(out) <= max_tokens:
            return out
        chars = int(chars * 0.8)

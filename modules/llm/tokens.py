"""TEMPORARY local stand-in for the lead's modules/llm/tokens.py (not committed)."""

from __future__ import annotations

import json


def count_tokens(text: str, model: str) -> int:
    ascii_chars = sum(1 for c in text if ord(c) < 128)
    return (ascii_chars + 3) // 4 + (len(text) - ascii_chars)


def count_messages(messages: list[dict], model: str) -> int:
    total = 3
    for m in messages:
        total += 4
        for key in ("content", "reasoning_content"):
            v = m.get(key)
            if isinstance(v, str):
                total += count_tokens(v, model)
        if m.get("tool_calls"):
            total += count_tokens(json.dumps(m["tool_calls"], ensure_ascii=False), model)
    return total

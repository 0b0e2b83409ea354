"""How many tokens a model's request may hold: the window per model (MODEL_CONTEXT_TOKENS, a profile's
`context_tokens`, else the table below), less a reserve for the reply; and the share at which compaction
starts (README, "Long conversations")."""

from __future__ import annotations

import threading
from dataclasses import dataclass

# Context windows (tokens) of well-known model names, matched by the longest prefix of the model's name
# after any provider prefix ("openai/gpt-4o" -> "gpt-4o"). Where a family's members differ, the smaller
# window is taken: compacting early costs one request, overflowing costs a turn.
KNOWN_WINDOWS: dict[str, int] = {
    "gpt-3.5-turbo": 16_385,
    "gpt-4": 8_192,
    "gpt-4-32k": 32_768,
    "gpt-4-turbo": 128_000,
    "gpt-4o": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-5": 400_000,
    "o1": 200_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    "deepseek": 64_000,
    "deepseek-chat": 64_000,
    "deepseek-reasoner": 64_000,
    "deepseek-v3": 128_000,
    "deepseek-r1": 128_000,
    "qwen": 32_768,
    "qwen-max": 32_768,
    "qwen-plus": 131_072,
    "qwen-turbo": 131_072,
    "qwen-long": 1_000_000,
    "qwen2.5": 32_768,
    "qwen3": 32_768,
    "glm": 128_000,
    "glm-4.5": 128_000,
    "glm-4.6": 200_000,
    "kimi": 131_072,
    "kimi-k2": 131_072,
    "moonshot-v1-8k": 8_192,
    "moonshot-v1-32k": 32_768,
    "moonshot-v1-128k": 131_072,
    "gemini": 1_048_576,
    "gemini-1.5-pro": 2_097_152,
    "claude": 200_000,
    "mistral": 32_768,
    "mistral-large": 131_072,
    "llama3": 8_192,
    "llama3.1": 131_072,
    "llama-3.1": 131_072,
}
UNKNOWN_WINDOW = 32_768  # a model of no known name: a window most current models exceed
COMPACT_AT = 0.8  # compaction starts when the history would pass this share of the room it has
COMPACT_TO = 0.4  # ... and keeps this share of that room verbatim (the most recent messages)
SUMMARY_SHARE = 0.2  # ... and a summary of at most this share
MAX_REPLY_RESERVE = 8_192
REFUSED_SHARE = 0.7


def known_window(model: str) -> int:
    """The table's window for `model`, or UNKNOWN_WINDOW."""
    name = model.strip().lower().rsplit("/", 1)[-1]
    matches = [key for key in KNOWN_WINDOWS if name.startswith(key)]
    return KNOWN_WINDOWS[max(matches, key=len)] if matches else UNKNOWN_WINDOW


@dataclass(frozen=True)
class ContextBudget:
    window: int  # the model's context window in tokens
    reserve: int  # kept free for the reply

    @property
    def limit(self) -> int:
        """The most a request (system prompt, tools, history) may hold."""
        return self.window - self.reserve

    def threshold(self, fixed: int) -> int:
        """Compaction starts when a request passes this; `fixed`: what no compaction shortens (the system
        prompt and tool definitions): the share applies to the room left after it."""
        return fixed + int((self.limit - fixed) * COMPACT_AT)

    def tail(self, fixed: int) -> int:
        """What compaction keeps verbatim of the newest history."""
        return int((self.limit - fixed) * COMPACT_TO)

    def refused_at(self, sent_tokens: int) -> ContextBudget:
        """The budget after the provider refused a request of `sent_tokens` (estimated) that this budget
        thought fit: requests of at most REFUSED_SHARE of that, the reply's reserve unchanged."""
        return ContextBudget(int(min(self.limit, sent_tokens) * REFUSED_SHARE) + self.reserve, self.reserve)


def budget_for(model: str, *, setting: int | None = None, profile: int | None = None) -> ContextBudget:
    """The profile's `context_tokens` wins over MODEL_CONTEXT_TOKENS, which wins over the table; a quarter
    of the window (at most MAX_REPLY_RESERVE) is kept for the reply."""
    window = profile or setting or known_window(model)
    return ContextBudget(window, min(MAX_REPLY_RESERVE, window // 4))


class RefusedSizes:
    """What providers revealed by refusing a request as too long: per model, the smallest refused size
    (estimated tokens), so this process keeps that model's later requests below it, not only the retry."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sizes: dict[str, int] = {}

    def refused(self, model: str, sent_tokens: int) -> None:
        with self._lock:
            self._sizes[model] = min(sent_tokens, self._sizes.get(model, sent_tokens))

    def within(self, model: str, budget: ContextBudget) -> ContextBudget:
        """`budget`, or the smaller one below a size `model` refused."""
        with self._lock:
            sent = self._sizes.get(model)
        return budget if sent is None or sent > budget.limit else budget.refused_at(sent)

"""The model-facing types: what any chat model (real endpoint or offline demo) returns."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text exactly as the model produced it (may be malformed)


@dataclass
class ModelReply:
    content: str
    tool_calls: list[ToolCall]
    finish_reason: str | None  # "stop", "tool_calls", "length", "stopped" (should_stop fired), ...


class ModelError(Exception):
    """A model call failed.

    Callers branch on `code` (never on the message): "rate_limited", "server_error",
    "timeout", "connection_error", "bad_request", "auth_error" or "model_error".
    `retryable` says whether trying again later may help; `status` is the HTTP status;
    `partial` is the text streamed before the failure (already shown to the user, never replayed).
    """

    def __init__(self, code: str, message: str, *, retryable: bool = False, status: int | None = None,
                 partial: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retryable = retryable
        self.status = status
        self.partial = partial

    def __repr__(self) -> str:
        return f"ModelError({self.code!r}, {self.message!r}, retryable={self.retryable}, status={self.status})"


def ignore_text(_text: str) -> None:
    """Default `on_text`: the caller does not want streamed text."""


def never_stop() -> bool:
    """Default `should_stop`: run to completion."""
    return False


class ChatModel(Protocol):
    label: str  # "demo" for the demo model, the base URL for a real endpoint (shown by /healthz)

    def stream_chat(
        self,
        *,
        messages: list[dict],
        tools: list[dict] | None = None,
        model: str | None = None,
        on_text: Callable[[str], None] = ignore_text,
        should_stop: Callable[[], bool] = never_stop,
    ) -> ModelReply:
        """Run one chat completion, streaming text to `on_text` and checking `should_stop` between chunks."""
        ...

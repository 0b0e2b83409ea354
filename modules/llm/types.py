"""The model-facing types: what any chat model (real endpoint or offline demo) returns."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text exactly as the model produced it (may be malformed)
    # What the provider asks to get back with the call, as it sent it: Gemini 3's `{"google": {"thought_signature":
    # ...}}`, without which its next request is refused (400).
    extra_content: dict[str, Any] | None = None


@dataclass(frozen=True)
class Usage:
    """Tokens of one model request as the provider reported them (`usage`, with
    `prompt_tokens_details.cached_tokens` and `completion_tokens_details.reasoning_tokens`)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0


@dataclass
class ModelReply:
    content: str
    tool_calls: list[ToolCall]
    finish_reason: str | None  # "stop", "tool_calls", "length", "stopped" (should_stop fired), ...
    reasoning: str = ""  # the model's thinking (`reasoning_content`, `reasoning`, a leading <think> block)
    usage: Usage | None = None  # None: the provider reported none
    model: str = ""  # the model the provider says answered (else the one asked for)
    latency_s: float = 0.0  # from sending the request to the reply's end
    first_token_s: float | None = None  # from sending the request to its first text, thinking or call
    # OpenRouter's structured thinking (`reasoning_details`, fragments merged): sent back with the message's tool
    # calls, which Gemini 3 through OpenRouter refuses (400) without its signatures.
    reasoning_details: list[dict[str, Any]] | None = None
    # Stopped before its attempt went out (while the client waited to ask again): this attempt sent nothing, so a
    # meter has nothing of it to count beyond the attempts it was told of (`on_failed_attempt`).
    unsent: bool = False

    @property
    def truncated(self) -> bool:
        """The provider cut the reply at its output limit (`length`; Mistral's `model_length`, the window's end): it
        may end mid-sentence."""
        return self.finish_reason in ("length", "model_length")

    @property
    def filtered(self) -> bool:
        """The provider's content filter stopped the reply (`content_filter`: Azure, Gemini's safety settings;
        `sensitive`: Zhipu's GLM): it may be empty or end early, and asking again gets the same answer."""
        return self.finish_reason in ("content_filter", "sensitive")


@dataclass(frozen=True)
class FailedAttempt:
    """An attempt of a call that the client gave up on and asked again, after the endpoint had begun to answer:
    the provider may have billed it, so the caller's meter records it as a failed request of its own (README,
    "Usage, budgets and metrics"). The call's last attempt is never one: the call's reply or error says that."""

    error: ModelError
    model: str  # the model the provider said answered, else the one asked for
    output: str  # what streamed back before the failure (none of it shown: the call would not be retried)
    usage: Usage | None  # what the provider reported before it failed, if it did
    latency_s: float
    first_token_s: float | None


# finish_reason values that say the provider failed to finish the reply (Zhipu's `network_error`, Mistral's
# `error`, vLLM's `abort`): the reply is a failure, retried as a server error while nothing was shown.
FAILED_FINISH_REASONS = frozenset({"network_error", "error", "abort"})


# `ModelError.code` values. CONTEXT_LENGTH_EXCEEDED covers every wording providers use for a request
# larger than the model's window: the caller can shorten the history and try once more.
CONTEXT_LENGTH_EXCEEDED = "context_length_exceeded"


class ModelError(Exception):
    """A model call failed.

    Callers branch on `code` (never on the message): "rate_limited", "server_error",
    "timeout", "connection_error", "bad_request", "auth_error", "context_length_exceeded"
    or "model_error". `retryable` says whether trying again later may help; `status` is the
    HTTP status; `partial` is the text streamed before the failure (already shown to the user,
    never replayed), `partial_reasoning` the thinking streamed before it.
    """

    def __init__(self, code: str, message: str, *, retryable: bool = False, status: int | None = None,
                 partial: str = "", partial_reasoning: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retryable = retryable
        self.status = status
        self.partial = partial
        self.partial_reasoning = partial_reasoning

    def __repr__(self) -> str:
        return f"ModelError({self.code!r}, {self.message!r}, retryable={self.retryable}, status={self.status})"


def ignore_text(_text: str) -> None:
    """Default `on_text` / `on_reasoning`: the caller does not want streamed text."""


def never_stop() -> bool:
    """Default `should_stop`: run to completion."""
    return False


def ignore_attempt(_attempt: FailedAttempt) -> None:
    """Default `on_failed_attempt`: the caller does not meter the attempts it did not get a reply from."""


class ChatModel(Protocol):
    label: str  # "demo" for the demo model, the base URL for a real endpoint (shown by /healthz)

    def stream_chat(
        self,
        *,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        model: str | None = None,
        on_text: Callable[[str], None] = ignore_text,
        should_stop: Callable[[], bool] = never_stop,
        on_reasoning: Callable[[str], None] = ignore_text,
        on_failed_attempt: Callable[[FailedAttempt], None] = ignore_attempt,
    ) -> ModelReply:
        """Run one chat completion, streaming text to `on_text` (and thinking to `on_reasoning`) and
        checking `should_stop` between chunks; each attempt retried after the endpoint had begun to answer is
        told to `on_failed_attempt`."""
        ...

"""What a failed request to an OpenAI-compatible endpoint means, as a ModelError the callers branch on."""

from __future__ import annotations

import time
from collections.abc import Mapping
from email.utils import parsedate_to_datetime
from typing import Any

from .types import CONTEXT_LENGTH_EXCEEDED, ModelError

# How providers word "the request is larger than the model's window" (OpenAI, DeepSeek, Qwen, Anthropic's
# and Gemini's compatible endpoints, vLLM, Ollama, LiteLLM, OpenRouter); 413 means the same.
_OVERFLOW_WORDINGS = (
    "context_length_exceeded", "context length", "maximum context", "context window", "prompt is too long",
    "input tokens exceed", "input is too long", "too many tokens", "max_tokens", "maximum number of tokens",
    "reduce the length", "token limit", "exceeds the limit of", "request too large",
)
_STATUS_OF_CODE = {"server_error": 500, "rate_limit_exceeded": 429}
# An error's `type` that means a status where no `code` says one (Anthropic's words, sent by gateways mid-stream).
_STATUS_OF_TYPE = {"rate_limit_error": 429, "overloaded_error": 529}
# Words of an error's `code` or `type` that blame the request, not the endpoint: asking again would not help.
_CLIENT_FAULT_WORDS = ("invalid", "auth", "permission", "forbidden", "not_found", "unsupported", "quota",
                       "billing", "moderation", "policy")
# A refusal of `stream_options` (Mistral answers 422, Groq 400, some vLLM builds 400).
_STREAM_OPTIONS_WORDINGS = ("stream_options", "include_usage")


def error_text(body: Any, fallback: str) -> str:
    """The provider's own words for an error body (`{"error": {"message": ...}}`, `{"message": ...}`,
    a FastAPI `detail` list, plain text), cut to a readable length."""
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping):
            message = inner.get("message") or inner.get("detail")
            code = inner.get("code")
            text = message if isinstance(message, str) else str(message or inner)
            return f"{text} ({code})" if isinstance(code, str) and code and code not in text else text
        return str(inner)[:500]
    return str(body or "")[:500] or fallback


def is_context_overflow(status: int | None, text: str) -> bool:
    lowered = text.lower()
    return status == 413 or (status in (None, 400, 422) and any(w in lowered for w in _OVERFLOW_WORDINGS))


def refuses_stream_options(status: int | None, text: str) -> bool:
    lowered = text.lower()
    return status in (400, 422) and any(w in lowered for w in _STREAM_OPTIONS_WORDINGS)


def _retried(status: int, message: str) -> ModelError | None:
    """The error of a status worth asking again for: a rate limit, a server error, a gateway's timeout (408:
    OpenRouter's "your request timed out"; the official client retries it too)."""
    if status == 429:
        return ModelError("rate_limited", message, retryable=True, status=status)
    if status >= 500:
        return ModelError("server_error", message, retryable=True, status=status)
    if status == 408:
        return ModelError("timeout", message, retryable=True, status=status)
    return None


def status_error(status: int, text: str) -> ModelError:
    """The ModelError of an HTTP error answer, with the provider's words in its message."""
    message = f"model endpoint answered {status}: {text}"
    if retried := _retried(status, message):
        return retried
    if is_context_overflow(status, text):
        return ModelError(CONTEXT_LENGTH_EXCEEDED, message, status=status)
    code = "auth_error" if status in {401, 403} else "bad_request" if 400 <= status < 500 else "model_error"
    return ModelError(code, message, status=status)


def stream_error(text: str, body: Any = None) -> ModelError:
    """An error the endpoint sent inside a 200 answer (an SSE `error` event, or a JSON error body). One whose
    `code` is an HTTP status (OpenRouter's errors after the stream began: 429, 502 when the upstream provider
    failed) means what that status means: a rate limit, a server error or a timeout is retried like one, another
    4xx (a moderation block) is not. One that names no status and no fault of the request (no `code`, an unknown
    one, only a `type`: "Upstream error" from a gateway mid-stream) is the endpoint's failure, retried as a 5xx
    would be; a window overflow, an invalid request or a refused key is not, as asking again gets the same."""
    status = _status_code(body)
    if status is not None and (retried := _retried(status, f"model endpoint error ({status}): {text}")):
        return retried
    if is_context_overflow(None, text):
        return ModelError(CONTEXT_LENGTH_EXCEEDED, f"model endpoint error: {text}")
    if status is None and not _names_client_fault(body):
        return ModelError("server_error", f"model endpoint error: {text}", retryable=True)
    return ModelError("model_error", f"model endpoint error: {text}")


def _names_client_fault(body: Any) -> bool:
    """The error's `code` or `type` says the request itself was refused (OpenAI's `invalid_request_error`,
    `invalid_api_key`, Anthropic's `authentication_error`, `permission_error`, `not_found_error`, ...)."""
    inner = body.get("error", body) if isinstance(body, Mapping) else None
    if not isinstance(inner, Mapping):
        return False
    named = " ".join(str(inner.get(key) or "") for key in ("code", "type")).lower()
    return any(word in named for word in _CLIENT_FAULT_WORDS)


def _status_code(body: Any) -> int | None:
    """The HTTP status an error body names as its `code` (`{"error": {"code": 502}}`, `{"code": "429"}`), or
    means by it (`server_error`, `rate_limit_exceeded`: OpenAI's words, which OpenRouter's stream uses too), or,
    with no `code`, by its `type` (`rate_limit_error`: a rate limit, waited out as one)."""
    inner = body.get("error", body) if isinstance(body, Mapping) else None
    code = inner.get("code") if isinstance(inner, Mapping) else None
    if code is None and isinstance(inner, Mapping):
        code = _STATUS_OF_TYPE.get(str(inner.get("type")))
    if isinstance(code, str):
        code = int(code) if code.isdigit() else _STATUS_OF_CODE.get(code)
    return code if isinstance(code, int) and not isinstance(code, bool) and 400 <= code <= 599 else None


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds the server asked us to wait (`retry-after-ms`, or `Retry-After` in seconds or as a date)."""
    try:
        if ms := headers.get("retry-after-ms"):
            return float(ms) / 1000
        value = headers.get("retry-after")
        if not value:
            return None
        try:
            return float(value)
        except ValueError:
            return parsedate_to_datetime(value).timestamp() - time.time()
    except (TypeError, ValueError):
        return None

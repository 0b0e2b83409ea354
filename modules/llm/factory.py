"""Chooses the model backend: a real endpoint when a key is configured, else the offline demo."""

from __future__ import annotations

from collections.abc import Callable

from .demo_model import DemoChatModel
from .openai_model import OpenAIChatModel
from .types import ChatModel, ModelError


def build_chat_model(
    *,
    api_key: str | None,
    base_url: str | None,
    default_model: str,
    timeout_s: float = 60,
    on_retry: Callable[[int, ModelError, float], None] | None = None,
    demo_chunk_delay_s: float = 0.02,
    max_retries: int = 4,
    backoff_base_s: float = 0.5,
    backoff_max_s: float = 8.0,
    max_connections: int = 1000,
) -> ChatModel:
    """OpenAIChatModel when `api_key` is non-empty, else DemoChatModel (so a fresh checkout runs)."""
    if api_key:
        return OpenAIChatModel(
            base_url=base_url or None,
            api_key=api_key,
            default_model=default_model,
            timeout_s=timeout_s,
            max_retries=max_retries,
            backoff_base_s=backoff_base_s,
            backoff_max_s=backoff_max_s,
            max_connections=max_connections,
            on_retry=on_retry,
        )
    return DemoChatModel(chunk_delay_s=demo_chunk_delay_s)

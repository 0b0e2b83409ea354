"""The real model client pointed at the suite's scripted OpenAI-compatible server, with retries short enough
for tests, and the one-message conversation most client tests send."""

from __future__ import annotations

from typing import Any

from modules.llm import OpenAIChatModel
from test.scripted_llm import ScriptedLLMServer

USER = [{"role": "user", "content": "hi"}]


def make_model(server: ScriptedLLMServer, **overrides: Any) -> OpenAIChatModel:
    options = {
        "base_url": server.base_url,
        "api_key": "test-key",
        "default_model": "scripted-model",
        "timeout_s": 5,
        "backoff_base_s": 0.01,
        "backoff_max_s": 0.05,
    }
    return OpenAIChatModel(**(options | overrides))

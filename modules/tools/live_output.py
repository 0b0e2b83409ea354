"""The live output of a running foreground command: throttled, capped `tool_output` events (docs/API.md).

A foreground `run_command` returns only when the command ends; meanwhile the UI shows what it prints.
The text goes into the task's log like every event, so it is bounded: a few events a second, and a cap
per call after which the `tool_result` (with the output's tail) is all that follows.
"""

from __future__ import annotations

import codecs
import time
from collections.abc import Callable
from typing import Any

from modules.event_catalogue import Event, ToolOutputEvent

LIVE_INTERVAL_S = 0.25
LIVE_CAP_CHARS = 16_000


class LiveOutput:
    """Called with each chunk the command prints (and with b"" on every idle poll, to send what waits)."""

    def __init__(self, emit: Callable[[Event], Any], tool_call_id: str, *,
                 interval_s: float = LIVE_INTERVAL_S, cap_chars: int = LIVE_CAP_CHARS):
        self._emit = emit
        self._tool_call_id = tool_call_id
        self._interval_s = interval_s
        self._cap = cap_chars
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending: list[str] = []
        self._sent = 0
        self._done = False
        self._last = 0.0

    def __call__(self, data: bytes) -> None:
        if self._done:
            return
        if data:
            self._pending.append(self._decoder.decode(data))
        if self._pending and time.monotonic() - self._last >= self._interval_s:
            self._flush()

    def _flush(self) -> None:
        text = "".join(self._pending).replace("\x00", "\ufffd")
        self._pending.clear()
        if not text:
            return
        room = self._cap - self._sent
        truncated = len(text) > room
        text = text[:room]
        self._sent += len(text)
        self._done = truncated
        self._last = time.monotonic()
        self._emit(ToolOutputEvent(tool_call_id=self._tool_call_id, text=text, truncated=truncated))

"""After a reply to the user completes, one asynchronous call proposes follow-up chips.

A newer user message in the conversation cancels suggestions still being made;
a failure yields none, never an error for the user.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from modules.config import Settings
from modules.event_catalogue import SuggestionsEvent
from modules.multi_agent.fast_path import RoutingSignals
from modules.suggestions import generate_suggestions
from modules.usage.metered_model import MeteredChatModel
from modules.usage.records import SUGGESTIONS, CallContext
from server.sender import TaskEventSender, Transport
from server.turns.event_log import EventLog

log = logging.getLogger(__name__)


class SuggestionService:
    def __init__(self, model: MeteredChatModel, settings: Settings, signals: RoutingSignals, event_log: EventLog,
                 transport: Transport, spawn: Callable[..., Any]):
        self._model, self._settings, self._signals = model, settings, signals
        self._event_log, self._transport, self._spawn = event_log, transport, spawn
        self._lock = threading.Lock()
        self._generation: dict[str, int] = {}

    def cancel(self, conversation_id: str) -> None:
        with self._lock:
            self._generation[conversation_id] = self._generation.get(conversation_id, 0) + 1

    def schedule(self, *, task_id: str, conversation_id: str, agent_id: str, reply_message_id: str,
                 user_message: str, reply: str, next_idx: int | None = None) -> None:
        """`next_idx`: the index of the ended task's next event, when its end knows it (the event log then need
        not read it: one statement a reply, issue 26)."""
        with self._lock:
            generation = self._generation.get(conversation_id, 0)
        self._spawn(self._run, task_id, conversation_id, agent_id, reply_message_id, user_message, reply,
                    generation, next_idx)

    def _run(self, task_id: str, conversation_id: str, agent_id: str, reply_message_id: str, user_message: str,
             reply: str, generation: int, next_idx: int | None) -> None:
        try:
            model = self._model.bound(CallContext(SUGGESTIONS, conversation_id, agent="SuggestionAgent",
                                                  agent_id=agent_id, task_id=None))
            questions = generate_suggestions(model, self._settings.stage_model("suggest") or None,
                                             user_message, reply, self._signals.quick_actions())
        except Exception:
            log.exception("suggestions failed")
            return
        with self._lock:
            if not questions or self._generation.get(conversation_id, 0) != generation:
                return
        if next_idx is not None:
            self._event_log.continue_at(task_id, next_idx)
        try:
            TaskEventSender(self._event_log, self._transport, task_id=task_id, conversation_id=conversation_id,
                            agent_id=agent_id).emit(SuggestionsEvent(questions=questions,
                                                                     message_id=reply_message_id))
        finally:
            self._event_log.forget(task_id)  # the task has ended: its log needs no cached state

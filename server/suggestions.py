"""After a reply to the user completes, one asynchronous call proposes follow-up chips.

A newer user message in the conversation cancels suggestions still being made;
a failure yields none, never an error for the user.
"""

from __future__ import annotations

import logging
import threading

from modules.suggestions import generate_suggestions
from server.runtime import Runtime
from server.sender import TaskEventSender

log = logging.getLogger(__name__)


class SuggestionService:
    def __init__(self, rt: Runtime):
        self._rt = rt
        self._lock = threading.Lock()
        self._generation: dict[str, int] = {}

    def cancel(self, conversation_id: str) -> None:
        with self._lock:
            self._generation[conversation_id] = self._generation.get(conversation_id, 0) + 1

    def schedule(self, *, task_id: str, conversation_id: str, agent_id: str, reply_message_id: str,
                 user_message: str, reply: str) -> None:
        with self._lock:
            generation = self._generation.get(conversation_id, 0)
        self._rt.spawn(self._run, task_id, conversation_id, agent_id, reply_message_id, user_message, reply,
                       generation)

    def _run(self, task_id: str, conversation_id: str, agent_id: str, reply_message_id: str, user_message: str,
             reply: str, generation: int) -> None:
        rt = self._rt
        try:
            questions = generate_suggestions(rt.model, rt.settings.stage_model("suggest") or None, user_message,
                                             reply, rt.signals.quick_actions())
        except Exception:
            log.exception("suggestions failed")
            return
        with self._lock:
            if not questions or self._generation.get(conversation_id, 0) != generation:
                return
        TaskEventSender(rt.event_log, rt.transport, task_id=task_id, conversation_id=conversation_id,
                        agent_id=agent_id).emit("suggestions", {"questions": questions,
                                                                "message_id": reply_message_id})
        rt.event_log.forget(task_id)  # the task has ended: its log needs no cached state

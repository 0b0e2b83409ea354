"""The open `ask_user` question of each conversation, in the shared session store.

The asking agent's process also holds an in-memory waiter; this record lets any
server process see that the user's next message is an answer (route `hil`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from modules.storage.session_store import SessionStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OpenQuestion:
    agent_id: str
    question_id: str


class UserQuestions:
    FIELD = "askUser"

    def __init__(self, store: SessionStore):
        self._store = store

    @staticmethod
    def key(conversation_id: str) -> str:
        return f"{conversation_id}:hil"

    def open(self, conversation_id: str, question: OpenQuestion) -> None:
        self._store.set(self.key(conversation_id), self.FIELD,
                        {"agent_id": question.agent_id, "question_id": question.question_id})

    def close(self, conversation_id: str, question_id: str) -> None:
        try:
            if (self.get(conversation_id) or OpenQuestion("", "")).question_id == question_id:
                self._store.delete(self.key(conversation_id), self.FIELD)
        except Exception as exc:
            log.warning("could not clear the open question %s: %s", question_id, exc)

    def get(self, conversation_id: str) -> OpenQuestion | None:
        try:
            value = self._store.get(self.key(conversation_id), self.FIELD)
        except Exception as exc:
            log.warning("open questions unreadable: %s", exc)
            return None
        if not isinstance(value, dict):
            return None
        return OpenQuestion(value.get("agent_id", ""), value.get("question_id", ""))

"""The open `ask_user` questions of each conversation, in the shared session store.

The asking agent's process also holds an in-memory waiter; these records let any
server process see that the user's next message is an answer (route `hil`).
Several agents may ask at once: each question is its own field, and the user
answers a given one by its `question_id` (else the oldest).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from modules.domain_errors import Conflict
from modules.storage.records import now
from modules.storage.session_store import SessionStore

log = logging.getLogger(__name__)


class StaleQuestion(Conflict):
    """A user's message answers a question that is not (or no longer) pending."""

    def __init__(self, question_id: str, open_ids: list[str]):
        pending = f"; open questions: {', '.join(open_ids)}" if open_ids else ""
        super().__init__("stale_question", f"question {question_id} is not pending{pending}")


@dataclass(frozen=True)
class OpenQuestion:
    agent_id: str
    question_id: str
    asked_at: float = 0.0


class UserQuestions:
    def __init__(self, store: SessionStore):
        self._store = store

    @staticmethod
    def key(conversation_id: str) -> str:
        return f"{conversation_id}:hil"

    def open(self, conversation_id: str, question: OpenQuestion) -> None:
        self._store.set(self.key(conversation_id), question.question_id,
                        {"agent_id": question.agent_id, "asked_at": question.asked_at or now()})

    def close(self, conversation_id: str, question_id: str) -> None:
        try:
            self._store.delete(self.key(conversation_id), question_id)
        except Exception as exc:
            log.warning("could not clear the open question %s: %s", question_id, exc)

    def close_for_agent(self, conversation_id: str, agent_id: str) -> None:
        """Forget an agent's open questions (its ask ended with its process)."""
        for question in self.list(conversation_id):
            if question.agent_id == agent_id:
                self.close(conversation_id, question.question_id)

    def list(self, conversation_id: str) -> list[OpenQuestion]:
        """Open questions, oldest first; an unreadable store reads as none."""
        try:
            fields = self._store.fields(self.key(conversation_id))
        except Exception as exc:
            log.warning("open questions unreadable: %s", exc)
            return []
        questions = [OpenQuestion(v.get("agent_id", ""), qid, float(v.get("asked_at", 0)))
                     for qid, v in fields.items() if isinstance(v, dict)]
        return sorted(questions, key=lambda q: q.asked_at)

"""The fast path's two halves: which agent reasoned last, and whether a message merely continues.

`is_continuation` normalises the message (trim, lower-case, full-width to
half-width, trailing punctuation and emoji stripped), vetoes it when any
topic-switch phrase occurs in it, and accepts it when it is a continuation
word or a short run of continuation words and separators ("好的，继续",
"ok 确认"). Because the veto looks for phrases *inside* the message, it can
fire on messages the continuation list would otherwise accept ("重新提交"
is made of continuation words, yet switches topic).
"""

from __future__ import annotations

import logging
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from modules.config import read_toml
from modules.storage.session_store import SessionStore

log = logging.getLogger(__name__)

DEFAULT_SIGNALS_FILE = Path(__file__).resolve().parent / "default_routing_signals.toml"
MAX_CONTINUATION_CHARS = 24
_SEPARATORS = re.compile(r"[\s,，、;；.。!！?？~～…:：\-—/]+")


class SignalsError(ValueError):
    """A routing-signals file that cannot be used."""


def normalise(message: str) -> str:
    text = unicodedata.normalize("NFKC", message).strip().lower()
    end = len(text)
    while end and (unicodedata.category(text[end - 1])[0] in "PSZ" or text[end - 1] in "\u200d\ufe0f"):
        end -= 1
    return text[:end].strip()


@dataclass(frozen=True)
class RoutingSignals:
    continuation: frozenset[str]
    topic_switch: tuple[str, ...]
    quick_action_words: tuple[str, ...]  # the continuation list as configured, in its order
    compact_words: frozenset[str]  # the continuation words without separators ("go on" -> "goon")

    @classmethod
    def of(cls, continuation: list[str], topic_switch: list[str]) -> RoutingSignals:
        words = tuple(dict.fromkeys(w.strip() for w in continuation if normalise(w)))
        normalised = frozenset(normalise(w) for w in words)
        return cls(normalised, tuple(normalise(w) for w in topic_switch if normalise(w)), words,
                   frozenset(_SEPARATORS.sub("", w) for w in normalised))

    def is_continuation(self, message: str) -> bool:
        text = normalise(message)
        if not text or len(text) > MAX_CONTINUATION_CHARS:
            return False
        if any(phrase in text for phrase in self.topic_switch):
            return False
        if text in self.continuation:
            return True
        return self._covers(_SEPARATORS.sub("", text))

    def _covers(self, compact: str) -> bool:
        """Whether `compact` (separators removed) is a run of continuation words ("好的继续", "okgoahead")."""
        reachable = [True] + [False] * len(compact)
        for end in range(1, len(compact) + 1):
            reachable[end] = any(reachable[start] and compact[start:end] in self.compact_words
                                 for start in range(end))
        return bool(compact) and reachable[-1]

    def quick_actions(self, limit: int = 40) -> list[str]:
        return list(self.quick_action_words[:limit])


def load_routing_signals(path: Path | None) -> RoutingSignals:
    path = path or DEFAULT_SIGNALS_FILE
    data = read_toml(path, SignalsError)
    lists = {}
    for name in ("continuation", "topic_switch"):
        words = data.get(name)
        if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
            raise SignalsError(f"{path}: field `{name}` must be a list of strings")
        lists[name] = words
    return RoutingSignals.of(lists["continuation"], lists["topic_switch"])


class ActiveAgentSessionStore:
    """The agent that reasoned last, per conversation, in the shared session store.

    Key `{conversation_id}:router`, field `activeAgent`, kept in the database so
    every server process sees it. Any failure reads as "no active agent" (the
    caller then takes the full pipeline) and is logged, never raised.
    """

    FIELD = "activeAgent"

    def __init__(self, store: SessionStore):
        self._store = store

    @staticmethod
    def key(conversation_id: str) -> str:
        return f"{conversation_id}:router"

    def get_active_agent(self, conversation_id: str) -> str | None:
        try:
            value = self._store.get(self.key(conversation_id), self.FIELD)
        except Exception as exc:
            log.warning("session store unreadable, taking the full pipeline: %s", exc)
            return None
        return value.get("agentName") if isinstance(value, dict) else None

    def set_active_agent(self, conversation_id: str, agent_name: str) -> None:
        try:
            self._store.set(self.key(conversation_id), self.FIELD, {"agentName": agent_name})
        except Exception as exc:
            log.warning("could not record the active agent %s: %s", agent_name, exc)

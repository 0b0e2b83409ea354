"""The word lists of the fast path, which say a message merely continues; the fast path itself (who reasoned last,
and the decision) is in modules/multi_agent/message_router.py.

`RoutingSignals` holds the configurable lists (`ROUTING_SIGNALS`, else the built-in
`default_routing_signals.toml`); `continuation` decides on words alone, `follow_up`
adds what the active agent last said. A topic-switch phrase anywhere in a message
vetoes it even when it is made of continuation words ("重新提交" is "重新" + "提交").
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from modules.config import read_toml
from modules.multi_agent.continuation import is_continuation_text, normalise, unit_set, units

log = logging.getLogger(__name__)

DEFAULT_SIGNALS_FILE = Path(__file__).resolve().parent / "default_routing_signals.toml"
OPTIONAL_LISTS = ("fillers", "action", "reference", "new_request", "attribute_prefix")

__all__ = ["RoutingSignals", "SignalsError", "load_routing_signals", "normalise"]


class SignalsError(ValueError):
    """A routing-signals file that cannot be used."""


def _phrases(words: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(n for n in (normalise(w) for w in words) if n))


@dataclass(frozen=True)
class RoutingSignals:
    continuation: frozenset[tuple[str, ...]]  # entries as units (see continuation.units)
    topic_switch: tuple[str, ...]
    quick_action_words: tuple[str, ...]  # the continuation list as configured, in its order
    fillers: frozenset[tuple[str, ...]] = frozenset()
    action: frozenset[tuple[str, ...]] = frozenset()
    reference: tuple[str, ...] = ()
    new_request: tuple[str, ...] = ()
    attribute_prefix: tuple[str, ...] = ()

    @classmethod
    def of(cls, continuation: Sequence[str], topic_switch: Sequence[str], fillers: Sequence[str] = (),
           action: Sequence[str] = (), reference: Sequence[str] = (), new_request: Sequence[str] = (),
           attribute_prefix: Sequence[str] = ()) -> RoutingSignals:
        words = tuple(dict.fromkeys(w.strip() for w in continuation if normalise(w)))
        return cls(unit_set(words), _phrases(list(topic_switch)), words, unit_set(fillers) - unit_set(words),
                   unit_set(action), _phrases(list(reference)), _phrases(list(new_request)),
                   _phrases(list(attribute_prefix)))

    def is_continuation(self, message: str) -> bool:
        return is_continuation_text(normalise(message), self.continuation, self.fillers, self.topic_switch)

    def acts_on_a_proposal(self, message: str) -> bool:
        """Whether the message carries an action word ("取消", "submit"): it then needs a reply that proposed."""
        parts = units(normalise(message))
        return any(parts[i:i + len(a)] == a for a in self.action for i in range(len(parts)))

    def quick_actions(self, limit: int = 40) -> list[str]:
        return list(self.quick_action_words[:limit])


def load_routing_signals(path: Path | None) -> RoutingSignals:
    """Read a signals file; an optional list it lacks comes from the built-in file."""
    path = path or DEFAULT_SIGNALS_FILE
    data = read_toml(path, SignalsError)
    defaults = data if path == DEFAULT_SIGNALS_FILE else read_toml(DEFAULT_SIGNALS_FILE, SignalsError)
    lists = {}
    for name in ("continuation", "topic_switch", *OPTIONAL_LISTS):
        words = data.get(name, defaults.get(name) if name in OPTIONAL_LISTS else None)
        if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
            raise SignalsError(f"{path}: field `{name}` must be a list of strings")
        lists[name] = words
    return RoutingSignals.of(**lists)

"""Whether a message merely continues: continuation words, with particles, politeness and fillers around them.

Text is cut into units: a Latin word is one unit, a CJK character is one unit, so
"ok 确认吧" is ["ok", "确", "认", "吧"] and an entry such as "go ahead" or "没问题"
matches a run of units. A message continues when its units are covered, clause by
clause, by continuation entries and fillers, and at least one continuation entry
occurs: "明白了，就这样吧", "好的 please", "cancel that booking", "thx!". Fillers
alone ("了", "please") never continue. Matching whole units keeps "no" out of
"nothing" and "ok" out of "okinawa".
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from functools import lru_cache

MAX_CONTINUATION_CHARS = 32
LATIN_WORD_CHARS = 2  # a Latin word counts as two characters of length: about what a Chinese word takes
_LATIN_WORD = re.compile(r"[a-z0-9']+")
_UNIT = re.compile(r"[a-z0-9']+|[^\sa-z0-9']")
_SEPARATORS = re.compile(r"[\s,，、;；.。!！?？~～…:：\-—/()（）\"“”]+")


def normalise(message: str) -> str:
    """Trim, lower-case, full-width to half-width, trailing punctuation, symbols and emoji stripped."""
    text = unicodedata.normalize("NFKC", message).strip().lower()
    end = len(text)
    while end and (unicodedata.category(text[end - 1])[0] in "PSZ" or text[end - 1] in "\u200d\ufe0f"):
        end -= 1
    return text[:end].strip()


def length(text: str) -> int:
    """How long a message is, alike for Chinese and English: a CJK character (or any other one) counts 1, a
    Latin word LATIN_WORD_CHARS, spaces and punctuation nothing ("ok, 确认" is 4)."""
    words = _LATIN_WORD.findall(text)
    rest = _LATIN_WORD.sub("", text)
    return LATIN_WORD_CHARS * len(words) + sum(1 for c in rest if unicodedata.category(c)[0] not in "PSZ")


def units(text: str) -> tuple[str, ...]:
    """Latin words and single other characters, separators and symbols dropped."""
    return tuple(u for u in _UNIT.findall(_SEPARATORS.sub(" ", text))
                 if u.strip() and unicodedata.category(u[0])[0] not in "PSZ")


def unit_set(words: Iterable[str]) -> frozenset[tuple[str, ...]]:
    return frozenset(u for u in (units(normalise(w)) for w in words) if u)


def contains(text: str, phrase: str) -> bool:
    """`phrase` in `text`; a Latin phrase only as whole words ("new" is not in "renew")."""
    if phrase.isascii():
        return re.search(rf"(?<![a-z0-9']){re.escape(phrase)}(?![a-z0-9'])", text) is not None
    return phrase in text


@lru_cache(maxsize=16)
def _longest(core: frozenset[tuple[str, ...]], fillers: frozenset[tuple[str, ...]]) -> int:
    return max((len(e) for e in core | fillers), default=0)


def covered(parts: tuple[str, ...], core: frozenset[tuple[str, ...]], fillers: frozenset[tuple[str, ...]]) -> bool:
    """Whether `parts` is a run of core entries and fillers with at least one core entry."""
    longest = _longest(core, fillers)
    # state per position: 0 unreachable, 1 reachable with fillers only, 2 reachable with a core entry
    state = [0] * (len(parts) + 1)
    state[0] = 1
    for start in range(len(parts)):
        if not state[start]:
            continue
        for end in range(start + 1, min(len(parts), start + longest) + 1):
            piece = parts[start:end]
            if piece in core:
                state[end] = 2
            elif piece in fillers and state[end] < state[start]:
                state[end] = state[start]
    return bool(parts) and state[-1] == 2


def is_continuation_text(text: str, core: frozenset[tuple[str, ...]], fillers: frozenset[tuple[str, ...]],
                         topic_switch: tuple[str, ...]) -> bool:
    """`text` normalised: short, no topic-switch phrase, and covered by continuation words and fillers."""
    if not text or length(text) > MAX_CONTINUATION_CHARS:
        return False
    if any(contains(text, phrase) for phrase in topic_switch):
        return False
    return covered(units(text), core, fillers)

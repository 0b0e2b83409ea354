"""What names each agent's domain, read from the team's own profiles: no word list written by hand.

Every profile's name ("HotelAgent": "hotel"), description and system prompt (and its
`keywords`, when given, as a boost) are cut into terms: Chinese into character bigrams
and trigrams of each run of CJK characters, English into lower-case words reduced by a
light stemmer ("hotels", "booking" -> "hotel", "book"). A term's weight in a profile is
the weight of the field it first appears in (name and keywords 3, description 2, system
prompt 1) plus up to 0.5 for how early it comes there: a description names its subject
first. A term is an agent's *own* when it weighs clearly more there than in any other profile (it
ties a message to the agent only from its name, keywords or description), *foreign* to an
agent when another profile weighs it clearly more (always when the agent lacks it), and
shared when the weights are within `TIE_MARGIN` (an attribute such as an address or a phone,
which neither ties a message to the active agent nor leads away from it); a term every
sub-agent's profile has names nobody. The master's profile is read for no term: it answers what the
others do not cover ("anything", "the traveller"), which names no domain. Words
of the routing signals (docs/API.md, `ROUTING_SIGNALS`: continuations, fillers,
references, new-request phrases) are the language around a domain, not a domain, and
are never terms; nor are n-grams that hold a one-character filler ("的", "了").

`TeamVocabulary.view(role)` is what the fast path's rules read (modules/multi_agent/follow_up.py):
the spans of a message that name the active agent's domain, and those naming another's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from modules.agents.profiles import MASTER_KIND, AgentProfile
from modules.multi_agent.continuation import normalise
from modules.multi_agent.fast_path import RoutingSignals

NAME_WEIGHT, KEYWORD_WEIGHT, DESCRIPTION_WEIGHT, PROMPT_WEIGHT = 3.0, 3.0, 2.0, 1.0
POSITION_BONUS = 0.5
TIE_MARGIN = 0.25  # weights closer than this are a tie: a term the agents share (an address, a phone)
CJK_NGRAMS = (2, 3)
MAX_PHRASE_WORDS = 3
MIN_WORD = 3  # English words shorter than this name no domain ("to", "by")

_CJK_RUN = re.compile(r"[\u3400-\u9fff]+")
_WORD = re.compile(r"[a-z][a-z0-9']*")
_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


@lru_cache(maxsize=16384)
def stem(word: str) -> str:
    """A light English stemmer: plurals, -ing, -ed ("policies" -> "policy", "booked" -> "book")."""
    w = word.lower().removesuffix("'s").strip("'")
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 4 and w.endswith(("sses", "shes", "ches", "xes", "zes")):
        return w[:-2]
    if len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "sis")) and w != "this":
        w = w[:-1]
    for suffix, keep in (("ing", 3), ("ed", 3)):
        if len(w) - len(suffix) >= keep and w.endswith(suffix):
            w = w[:-len(suffix)]
            if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "lsz":
                w = w[:-1]  # "running" -> "run"
            break
    return w.removesuffix("e") if len(w) > 4 else w


class Span(NamedTuple):  # a tuple: the rules and the model cut every message and reply into many
    start: int
    end: int
    term: str


@lru_cache(maxsize=256)
def _english_spans(text: str) -> tuple[Span, ...]:
    """Every run of 1..MAX_PHRASE_WORDS words as its stems joined by a space, with its span (cached: the rules
    and the follow-up model read the same message and reply several times)."""
    words = [(m.start(), m.end(), stem(m.group(0))) for m in _WORD.finditer(text)]
    spans = []
    for i in range(len(words)):
        for n in range(1, MAX_PHRASE_WORDS + 1):
            if i + n <= len(words):
                spans.append(Span(words[i][0], words[i + n - 1][1], " ".join(w[2] for w in words[i:i + n])))
    return tuple(spans)


@lru_cache(maxsize=256)
def _cjk_spans(text: str, lengths: tuple[int, ...]) -> tuple[Span, ...]:
    spans = []
    for run in _CJK_RUN.finditer(text):
        for n in lengths:
            for i in range(run.start(), run.end() - n + 1):
                spans.append(Span(i, i + n, text[i:i + n]))
    return tuple(spans)


def _field_terms(text: str, *, words_only: bool = False) -> dict[str, float]:
    """Terms of one field with how early each first comes (1.0 at the start, 0.0 at the end)."""
    norm = normalise(text)
    found: dict[str, float] = {}
    spans = _english_spans(norm) if words_only else [
        s for s in _english_spans(norm) if " " not in s.term] + list(_cjk_spans(norm, CJK_NGRAMS))
    for s in spans:
        found.setdefault(s.term, 1.0 - s.start / max(1, len(norm)))
    return found


def _name_text(name: str) -> str:
    return " ".join(p.lower() for p in _CAMEL.findall(name))


class TeamVocabulary:
    """Each profile's weighted terms; `view(role)` answers for one active agent."""

    def __init__(self, weights: dict[str, dict[str, float]]):
        self._weights = weights  # term -> role -> weight
        self._cjk_lengths = tuple(sorted({len(t) for t in weights if not t.isascii()}))
        self._views: dict[str, DomainView] = {}

    @classmethod
    def of(cls, profiles: Mapping[str, AgentProfile], signals: RoutingSignals,
           use_keywords: bool = True) -> TeamVocabulary:
        stop = signal_terms(signals)
        weights: dict[str, dict[str, float]] = {}

        def add(role: str, terms: dict[str, float], weight: float, explicit: bool = False) -> None:
            for term, early in terms.items():
                if not explicit and (term in stop or _is_function(term, signals)):
                    continue
                score = weight + POSITION_BONUS * early
                if score > weights.setdefault(term, {}).get(role, 0.0):
                    weights[term][role] = score

        domains = {n: p for n, p in profiles.items() if p.kind != MASTER_KIND}  # the master's is the rest
        for name, p in domains.items():
            add(name, _field_terms(_name_text(name)), NAME_WEIGHT)
            add(name, _field_terms(p.description), DESCRIPTION_WEIGHT)
            add(name, _field_terms(p.system_prompt), PROMPT_WEIGHT)
            if use_keywords:
                for k in p.keywords:
                    add(name, {_keyword_term(k): 1.0}, KEYWORD_WEIGHT, explicit=True)
        for term in [t for t, by in weights.items() if len(domains) > 1 and len(by) == len(domains)]:
            del weights[term]  # every sub-agent's profile has it: it names nobody
        return cls(weights)

    def view(self, role: str) -> DomainView:
        if role not in self._views:
            own, strong, foreign, named = set(), set(), set(), set()
            for term, by in self._weights.items():
                mine = by.get(role, 0.0)
                other = max((w for r, w in by.items() if r != role), default=0.0)
                if mine > other + TIE_MARGIN:
                    own.add(term)
                    if mine >= DESCRIPTION_WEIGHT:
                        strong.add(term)
                elif other > mine + TIE_MARGIN:
                    foreign.add(term)
                    if other >= KEYWORD_WEIGHT or len(by) < 2:
                        named.add(term)
            self._views[role] = DomainView(frozenset(own), frozenset(foreign), self._cjk_lengths, frozenset(strong),
                                           frozenset(named))
        return self._views[role]

    def terms_of(self, role: str) -> list[str]:
        """The role's own terms, strongest first (for docs and diagnostics)."""
        own = self.view(role).own
        return sorted(own, key=lambda t: -self._weights[t][role])


@dataclass(frozen=True)
class DomainView:
    """The terms one active agent's fast path reads: its own, and those naming another agent's domain."""

    own: frozenset[str]
    foreign: frozenset[str]
    cjk_lengths: tuple[int, ...]
    strong: frozenset[str] = frozenset()  # own terms of its name, keywords or description: they tie a message
    named: frozenset[str] | None = None  # foreign terms that name one domain (None: every foreign term)

    def is_named(self, term: str) -> bool:
        """Whether the term names another agent's domain: by that agent's name or keywords, or by one
        description alone ("entrance fee"); not a property that several descriptions mention ("the address",
        "the phone number" of a hotel, a hospital and the police)."""
        return self.named is None or term in self.named

    def names_own(self, text: str) -> bool:
        return any(s.term in self.strong for s in self.spans(text)[0])

    @classmethod
    def of_terms(cls, own: Iterable[str], foreign: Iterable[str]) -> DomainView:
        """A view from explicit terms (tests, and callers that know their terms)."""
        own_t = frozenset(_keyword_term(t) for t in own)
        foreign_t = frozenset(_keyword_term(t) for t in foreign) - own_t
        return cls(own_t, foreign_t, tuple(sorted({len(t) for t in own_t | foreign_t if not t.isascii()})), own_t)

    def spans(self, text: str) -> tuple[list[Span], list[Span]]:
        """(spans naming the agent's own domain, spans naming another agent's) in normalised `text`."""
        candidates = _english_spans(text) + _cjk_spans(text, self.cjk_lengths)
        return ([s for s in candidates if s.term in self.own], [s for s in candidates if s.term in self.foreign])


def _keyword_term(keyword: str) -> str:
    norm = normalise(keyword)
    if norm.isascii():
        return " ".join(stem(w) for w in _WORD.findall(norm))
    return norm


@lru_cache(maxsize=1024)
def content_terms(text: str, signals: RoutingSignals) -> frozenset[str]:
    """The terms of a text that may name something (English stems, Chinese bigrams), without the signals'
    language: what a message and the question it answers have in common ("leave" in "When do you want to
    leave?" and "I would like to leave on Saturday")."""
    stop = signal_terms(signals)
    norm = normalise(text)
    spans = [s for s in _english_spans(norm) if " " not in s.term] + list(_cjk_spans(norm, (2,)))
    return frozenset(s.term for s in spans if s.term not in stop and not _is_function(s.term, signals))


@lru_cache(maxsize=8)
def signal_terms(signals: RoutingSignals) -> frozenset[str]:
    """The routing signals' language around a domain (docs/API.md, `ROUTING_SIGNALS`): continuation words
    that act on nothing ("ok", "谢谢"), fillers, references, attribute prefixes and topic-switch phrases, and
    every word of them, and its function words; of the action words, the entries themselves ("confirm",
    "预订": "confirms" in a description must not keep "确认"/"confirm" from the agent that proposed it), not the
    words of a longer one ("book" of "book it"). New-request phrases and fillers that name what is confirmed
    ("booking", "order") may name a domain: kept. A profile's `keywords` are terms even when listed here."""
    plain = signals.continuation - signals.action
    fillers = [u for u in signals.fillers if not all(x.isascii() for x in u) or len(" ".join(u)) <= 4]
    phrases = [" ".join(u) if all(x.isascii() for x in u) else "".join(u) for u in (*plain, *fillers)]
    phrases += [*signals.reference, *signals.attribute_prefix, *signals.topic_switch, *signals.function_words]
    stop: set[str] = {" ".join(stem(w) for w in u) if all(x.isascii() for x in u) else "".join(u)
                      for u in signals.action}
    for p in phrases:
        if p.isascii():
            words = [stem(w) for w in _WORD.findall(p)]
            stop.update(words)
            stop.add(" ".join(words))
        else:
            stop.add(p)
    return frozenset(stop)


def _is_function(term: str, signals: RoutingSignals) -> bool:
    if term.isascii():
        return len(term) < MIN_WORD or term.isdigit()
    return not _filler_chars(signals).isdisjoint(term)


@lru_cache(maxsize=8)
def _filler_chars(signals: RoutingSignals) -> frozenset[str]:
    return frozenset(u[0] for u in signals.fillers if len(u) == 1 and not u[0].isascii())

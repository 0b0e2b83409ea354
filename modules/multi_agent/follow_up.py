"""Whether a message goes on with the active agent, judged against what that agent last said.

Rules, no model. A message may go to the active agent without the pipeline when
nothing in it points elsewhere (no topic-switch phrase, no domain term of another
agent's profile outside "周边/near ..." attributes of the current subject, no new
request without a word that refers back) and something ties it to the agent:
it is a continuation (`continuation`; an `action` word such as "取消" or "submit" only
after a reply that proposed, offered or asked something, or as a chip offered after it),
it refers back ("它", "the second one", "那上海呢"), it names a term of the active agent's
own domain ("人均多少？" to the restaurant agent) or a name from its last reply, or it is a
short answer to the question, options or proposal that reply ended with. An opening
acknowledgement ("好的，那上海呢") is judged by what follows it. Anything else is left to
the model (`UNDECIDED`): a rule never guesses another agent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from modules.multi_agent.continuation import contains, length, normalise
from modules.multi_agent.domain_vocabulary import DomainView, Span, content_terms
from modules.multi_agent.fast_path import RoutingSignals

MAX_FOLLOW_UP_CHARS = 48  # lengths as `continuation.length`: a Latin word counts two
MAX_ANSWER_CHARS = 16
MAX_REQUEST_CHARS = 24  # a longer message that opens a request is one of its own, even if it points back
ATTRIBUTE_SPAN = 10  # characters between an attribute prefix and the term it governs ("周边都有哪些景点")
NAME_OVERLAP = 4  # characters a message must share in a row with the last reply to name something in it

CONTINUES, UNDECIDED = "continues", "undecided"
_QUESTION_END = re.compile(r"(\?|？|吗|呢|么|哪个|哪家|哪一|which|what|when|where|how|shall i|should i|do you)"
                           r"[\s\"”'）)]*$")
_PROPOSAL = re.compile(r"(确认|需要|要不要|要我|是否|可以吗|好吗|行吗|帮您|为您|shall i|should i|would you like|"
                       r"do you want|want me to|confirm|proceed)")
_OPTIONS = re.compile(r"(^|\n)\s*(\d+[.、)]|[-*•]|[a-c][.)])\s*\S|(1[.、)].*2[.、)])|（1）|选项|或者|还是| or ",
                      re.DOTALL)
_ELLIPTIC = re.compile(r"^.{0,16}呢$|(\btoo|\bas well|\beither)$|^(那|那么|and |what about |how about )")
_CLAUSE_BREAK = re.compile(r"[,，、;；.。!！?？]")
_DIGIT = re.compile(r"\d")
_DEFINITE = re.compile(r"\b(the|their|its|that|this|these|those|your)\s+([a-z'-]+\s+)?$")
_OTHER = re.compile(r"其他|其它|别的|另外|other")
_FIRST_CLAUSE = re.compile(r"^([^,，、;；.。!！?？]+)[,，、;；.。!！?？]\s*(.+)$")
_CJK_RUN = re.compile(r"[\u4e00-\u9fff\w]+")
_CLOSING = re.compile(r"(anything else|还有(什么|别的|其他)?(需要|问题|可以|要)|随时|有问题再|祝您|祝你|再见|不客气|"
                      r"you're welcome|let me know)")


@dataclass(frozen=True)
class ReplyContext:
    """The active agent's last reply, read for how it ended."""

    text: str

    @property
    def asked_question(self) -> bool:
        tail = normalise(self.text)[-40:]
        return bool(tail) and (_QUESTION_END.search(tail) is not None or "?" in self.text[-60:]
                               or "？" in self.text[-60:])

    @property
    def question(self) -> str:
        """The reply's last sentence when it asks something ("What day would you like to leave?"), else ""."""
        if not self.asked_question:
            return ""
        body = self.text.rstrip()
        end = max(body.rfind("?"), body.rfind("？"))
        head = body[:end] if end >= 0 else body
        start = max(head.rfind(c) for c in ".。!！\n?？")
        return body[start + 1:end + 1 if end >= 0 else None]

    @property
    def offered_options(self) -> bool:
        return _OPTIONS.search(self.text) is not None

    @property
    def proposed_action(self) -> bool:
        return _PROPOSAL.search(normalise(self.text)[-80:]) is not None

    @property
    def invites_action(self) -> bool:
        """A proposal, options or an open question that is not just "anything else?"."""
        tail = normalise(self.text)[-40:]
        return _CLOSING.search(tail) is None and (self.proposed_action or self.offered_options or self.asked_question)


@dataclass(frozen=True)
class Verdict:
    decision: str  # CONTINUES or UNDECIDED
    reason: str

    @property
    def continues(self) -> bool:
        return self.decision == CONTINUES


def _foreign_term(text: str, domain: DomainView, signals: RoutingSignals, reply: str | None) -> str | None:
    """The first term of another agent that is not an attribute of the current subject.

    A property that several other agents' descriptions mention (not their names or keywords), after a definite
    determiner ("the address", "their phone number"), asks about what the active agent just named.

    "这家餐馆周边有什么景点" asks the restaurant agent about its restaurant: a term right after an
    attribute prefix, within one clause, with no new request in between and no number constraining it
    afterwards ("周边的景点里哪个评分是 5 分" asks for sights), is an attribute. A term that names another
    agent's domain is one only when the prefix's subject is the active agent's (`_subject_is_own`): "颐和园周边的
    餐馆" to the metro agent, of a place its reply never named, asks for restaurants."""
    own, foreign = domain.spans(text)
    for span in sorted(foreign, key=lambda s: s.start):
        if any(o.start <= span.start and span.end <= o.end for o in own):
            continue  # part of a longer term of the active agent ("店" in "酒店")
        if not domain.is_named(span.term) and _DEFINITE.search(text[:span.start]):
            continue  # "the phone number", "their address": a property of what was just named
        prefix = _attribute_prefix(text, span.start, span.end, signals)
        if prefix is None or (domain.is_named(span.term)
                              and not _subject_is_own(text[:prefix], own, domain, signals, reply)):
            return span.term
    return None


def _attribute_prefix(text: str, start: int, end: int, signals: RoutingSignals) -> int | None:
    """Where the attribute prefix that governs the term at `start:end` begins, or None when none does."""
    before = text[:start]
    found = [(before.rfind(p), p) for p in signals.attribute_prefix if p in before]
    if not found:
        return None
    at, prefix = max(found, key=lambda f: f[0] + len(f[1]))
    gap = before[at + len(prefix):]
    if _OTHER.search(gap):  # "周边还有其他餐馆" : the subject is a restaurant too
        return None
    attribute = (len(gap) <= ATTRIBUTE_SPAN and not _CLAUSE_BREAK.search(gap)
                 and not any(contains(gap, n) for n in signals.new_request) and not _DIGIT.search(text[end:]))
    return at if attribute else None


def _subject_is_own(before: str, own: list[Span], domain: DomainView, signals: RoutingSignals,
                    reply: str | None) -> bool:
    """Whether the clause before an attribute prefix is about what the active agent handles: nothing ("周边有什么"),
    a reference ("它家"), a term of its own domain ("这家餐馆") or a name its last reply gave ("故宫")."""
    clause_start = max((m.end() for m in _CLAUSE_BREAK.finditer(before)), default=0)
    subject = before[clause_start:]
    terms = content_terms(subject, signals)
    return (not terms or any(contains(subject, r) for r in signals.reference)
            or any(clause_start <= o.start and o.end <= len(before) for o in own)
            or bool(reply and terms & content_terms(normalise(reply), signals)))


def _shares_a_name(text: str, reply: str) -> bool:
    """Whether the message repeats NAME_OVERLAP characters in a row of the reply (a hotel's, a city's name).
    Not used when the reply also lists what is nearby: the name may be one of those, of another kind."""
    reply_norm = normalise(reply)
    for run in _CJK_RUN.findall(text):
        for i in range(len(run) - NAME_OVERLAP + 1):
            if run[i:i + NAME_OVERLAP] in reply_norm:
                return True
    return False


def judge(signals: RoutingSignals, message: str, reply: str | None, domain: DomainView,
          offered: tuple[str, ...] = ()) -> Verdict:
    """Continue with the active agent, or leave it to the model; `reply` is the active agent's last text,
    `domain` the terms of its domain and of the others' (modules/multi_agent/domain_vocabulary.py), `offered`
    the suggestion chips shown after the reply (a quick-action chip fits that reply by construction)."""
    text = normalise(message)
    if not text:
        return Verdict(CONTINUES if message.strip() else UNDECIDED, "emoji only" if message.strip() else "empty")
    if any(contains(text, p) for p in signals.topic_switch):
        return Verdict(UNDECIDED, "topic-switch phrase")
    foreign = _foreign_term(text, domain, signals, reply)
    if foreign is not None:
        return Verdict(UNDECIDED, f"another agent's term {foreign!r}")
    opener = _FIRST_CLAUSE.match(text)
    if opener and signals.is_continuation(opener.group(1)) and not signals.is_continuation(text):
        # "ok, and tolls?", "好的，那上海呢": an acknowledgement, then what the message is about
        rest = judge(signals, opener.group(2), reply, domain, offered)
        return Verdict(rest.decision, f"after an acknowledgement: {rest.reason}")
    if signals.is_continuation(text):
        chip = any(normalise(o) == text for o in offered)
        if signals.acts_on_a_proposal(text) and not chip and not (reply and ReplyContext(reply).invites_action):
            return Verdict(UNDECIDED, "an action word, but the last reply proposed nothing")
        return Verdict(CONTINUES, "continuation")
    if length(text) > MAX_FOLLOW_UP_CHARS:
        return Verdict(UNDECIDED, "too long")
    names_own = domain.names_own(text)
    pointing = text.replace("其它", "其他")  # "other", not "it"
    new_request = any(contains(text, p) for p in signals.new_request)
    # "那上海呢" is elliptic; "那帮我订一张去新加坡的机票" opens a request of its own
    elliptic = _ELLIPTIC.search(text) is not None and not new_request
    refers = any(contains(pointing, r) for r in signals.reference) or elliptic
    answers = reply is not None and bool(content_terms(text, signals)
                                         & content_terms(ReplyContext(reply).question, signals))
    if answers and not refers:
        return Verdict(CONTINUES, "answers the question of the last reply")
    if new_request and not refers and not names_own:
        return Verdict(UNDECIDED, "new request")
    if new_request and length(text) > MAX_REQUEST_CHARS and not names_own:
        return Verdict(UNDECIDED, "a long new request")
    if refers:
        return Verdict(CONTINUES, "refers back")
    if names_own:
        return Verdict(CONTINUES, "own domain term")
    if reply:
        context = ReplyContext(reply)
        if _shares_a_name(text, reply) and not any(p in reply for p in signals.attribute_prefix):
            return Verdict(CONTINUES, "names something in the last reply")
        if len(text) <= MAX_ANSWER_CHARS and context.invites_action:
            return Verdict(CONTINUES, "answers the last reply")
    return Verdict(UNDECIDED, "no tie to the active agent")

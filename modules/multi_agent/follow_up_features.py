"""What the follow-up model (modules/multi_agent/follow_up_model.py) reads of a message: features with no team in them.

The words that name a domain are replaced by what they are to the active agent, read from the team's profiles
(modules/multi_agent/domain_vocabulary.py): `<O>` its own domain, `<F>` another agent's (`<S>` a property several
describe, such as an address), so a weight learnt on a travel team's dialogues holds for any team. Then: English
stems and their pairs, Chinese character bigrams of the delexicalised text, the rules' verdict
(modules/multi_agent/follow_up.py), how the active agent's last reply ended (a question, options, a proposal,
a closing) and whose domain it names, what the message shares with that reply, its length and whether it holds numbers.
"""

from __future__ import annotations

import re

from modules.multi_agent.continuation import length, normalise
from modules.multi_agent.domain_vocabulary import DomainView, content_terms, stem
from modules.multi_agent.fast_path import RoutingSignals
from modules.multi_agent.follow_up import ReplyContext, Verdict

_TOKEN = re.compile(r"[a-z][a-z0-9']*|\d+|[\u3400-\u9fff]|[^\sa-z0-9\u3400-\u9fff]")
_DIGIT = re.compile(r"\d")
_REASON_QUOTE = re.compile(r" '.*'$")
_CJK = re.compile(r"[\u3400-\u9fff]")
_NAME = re.compile(r"(?<![.!?] )(?<!^)\b[A-Z][a-z']+(?: [A-Z][a-z']+)*")
LENGTH_BUCKETS = (2, 4, 8, 12, 20, 32, 48)
MAX_TOKENS = 60  # a longer message adds nothing a shorter part of it does not
REPLY_TAIL = 160  # characters of the reply read for its terms: where it ends is what the user answers


def _bucket(value: int, bounds: tuple[int, ...]) -> str:
    return str(next((b for b in bounds if value <= b), "more"))


def _marks(text: str, domain: DomainView) -> list[str]:
    """Per character of `text`: "" or what domain term covers it (`<O>`, `<F>`, `<S>`; own wins)."""
    own, foreign = domain.spans(text)
    marks = [""] * len(text)
    for span in foreign:
        mark = "<F>" if domain.is_named(span.term) else "<S>"
        for i in range(span.start, span.end):
            if marks[i] != "<F>":
                marks[i] = mark
    for span in own:
        for i in range(span.start, span.end):
            marks[i] = "<O>"
    return marks


def _about(marks: set[str]) -> str:
    """Whose domain a text names: the active agent's own, another's, both or none (a conjunction the linear model
    cannot form from the marks alone: a reply that names only another agent's domain hands the topic over)."""
    own, foreign = "<O>" in marks, "<F>" in marks
    return "both" if own and foreign else "own" if own else "foreign" if foreign else "none"


def delexicalised(text: str, domain: DomainView) -> list[str]:
    """The message's tokens (English stems, Chinese characters, digits as `0`, punctuation), each run of a
    domain term's characters one mark."""
    marks = _marks(text, domain)
    tokens: list[str] = []
    for m in _TOKEN.finditer(text):
        mark = marks[m.start()]
        if mark:
            if not tokens or tokens[-1] != mark:
                tokens.append(mark)
            continue
        tok = m.group(0)
        tokens.append("0" if tok.isdigit() else stem(tok) if tok[0].isascii() and tok[0].isalpha() else tok)
    return tokens[:MAX_TOKENS]


def features(signals: RoutingSignals, message: str, reply: str | None, domain: DomainView,
             rules: Verdict) -> list[str]:
    """The features of one message to the active agent whose last text is `reply`, after the rules' verdict."""
    text = normalise(message)
    reason = _REASON_QUOTE.sub("", rules.reason)
    out = ["bias", f"r={reason}", f"d={rules.decision}"]
    tokens = ["^", *delexicalised(text, domain), "$"]
    out += [f"w={t}" for t in tokens[1:-1]]
    out += [f"b={a}_{b}" for a, b in zip(tokens, tokens[1:], strict=False)]
    latin = [t for t in tokens if t[0].isascii() and t[0].isalpha()]
    out += [f"e={a}_{b}" for a, b in zip(latin, latin[1:], strict=False) if len(a) > 1 or len(b) > 1]
    out.append(f"len={_bucket(length(text), LENGTH_BUCKETS)}")
    out.append(f"lang={'zh' if _CJK.search(text) else 'en'}")
    if _DIGIT.search(text):
        out.append("digits")
    if reply:
        ctx = ReplyContext(reply)
        asked, options, proposed, invites = (ctx.asked_question, ctx.offered_options, ctx.proposed_action,
                                             ctx.invites_action)
        out += [f"reply={k}" for k, on in (("question", asked), ("options", options), ("proposal", proposed),
                                          ("invites", invites)) if on]
        if not invites:
            out.append("reply=closing")
        tail = normalise(reply)[-REPLY_TAIL:]
        for part, body in (("", tail), ("_q", normalise(ctx.question)[-REPLY_TAIL:])):
            marks = set(_marks(body, domain)) - {""}
            out += [f"reply{part}={m}" for m in sorted(marks)]
            out.append(f"reply{part}_about={_about(marks)}")
        out.append(f"about={_about(set(tokens))}|{_about(set(_marks(tail, domain)))}")
        names = [n for n in _NAME.findall(message.strip()) if n not in ("I", "I'm", "I'd", "I'll")]
        out += ["name=in reply" if n.lower() in reply.lower() else "name=new" for n in names[:3]]
        mine = content_terms(text, signals)
        shared = len(mine & content_terms(tail, signals))
        out.append(f"shared={_bucket(shared, (0, 1, 2, 4))}")
        if mine & content_terms(ctx.question, signals):
            out.append("answers")
    else:
        out.append("reply=none")
    context = [n for n in out if n.startswith(("reply", "name=", "answers", "len=", "digits"))]
    out += [f"x={reason}|{n}" for n in context]  # how the rules decided, with what the reply was
    return out

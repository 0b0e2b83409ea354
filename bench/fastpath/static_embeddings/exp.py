"""bench/train_follow_up.py with English messages given features of what they mean (README.md beside this file).

`EMB=off`: the shipped features; `on`: three cosines with the profiles and the reply, bucketed; `reason`: those
also crossed with the rules' verdict."""

import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.abspath(os.path.join(HERE, "../../..")), HERE]

import embed  # noqa: E402

import bench.train_follow_up as train  # noqa: E402
from bench.fastpath.woz import MULTIWOZ, SGD  # noqa: E402
from modules.multi_agent import domain_vocabulary as dv  # noqa: E402

MODE = os.environ.get("EMB", "on")
_REASON_QUOTE = re.compile(r" '.*'$")
VIEW_OWNER: dict[int, tuple[dv.TeamVocabulary, str]] = {}
_of, _view, _features = dv.TeamVocabulary.of.__func__, dv.TeamVocabulary.view, train.features


def _profile_text(name, profile) -> str:
    return f"{dv._name_text(name)}. {profile.description} {profile.system_prompt}"


def of(cls, profiles, signals, use_keywords=True):
    vocabulary = _of(cls, profiles, signals, use_keywords)
    vocabulary.vectors = {n: embed.vec(_profile_text(n, p)) for n, p in profiles.items()}
    vocabulary.masters = {n for n, p in profiles.items() if p.kind == "master"}
    return vocabulary


def view(self, role):
    found = _view(self, role)
    VIEW_OWNER[id(found)] = (self, role)
    return found


def bucket(x: float, step: float = 0.05, lo: float = -0.4, hi: float = 0.4) -> str:
    return f"{round(max(lo, min(hi, x)) / step) * step:+.2f}"


def features(signals, message, reply, domain, rules):
    out = _features(signals, message, reply, domain, rules)
    m = embed.vec(message) if MODE != "off" and "lang=en" in out else None
    if m is None:
        return out
    vocabulary, role = VIEW_OWNER[id(domain)]
    vectors = vocabulary.vectors
    subs = [n for n, v in vectors.items() if n not in vocabulary.masters and v is not None]
    other = max((float(m @ vectors[n]) for n in subs if n != role), default=0.0)
    extra = []
    if role in subs:
        own = float(m @ vectors[role])
        extra.append(f"em={bucket(own - other)}")
        r = embed.vec(reply[-240:]) if reply else None
        if r is not None:
            reply_margin = float(r @ vectors[role]) - max((float(r @ vectors[n]) for n in subs if n != role),
                                                          default=0.0)
            extra.append(f"er={bucket(float(m @ r), 0.1, -0.2, 0.8)}")
            extra.append(f"emr={bucket(own - other - reply_margin)}")
    else:
        extra.append(f"eo={bucket(other, 0.1, -0.2, 0.8)}")
    crossed = [f"x={rules.decision}|{e}" for e in extra]
    if MODE == "reason":
        crossed += [f"y={_REASON_QUOTE.sub('', rules.reason)}|{e}" for e in extra]
    return out + extra + crossed


def main() -> int:
    texts = [text for s in (SGD, MULTIWOZ) for d in s.load() for t in d if t.split in ("train", "dev")
             for text in (t.user, t.reply)]
    embed.set_weights(texts)
    dv.TeamVocabulary.of = classmethod(of)
    dv.TeamVocabulary.view = view
    train.features = features
    return train.main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())

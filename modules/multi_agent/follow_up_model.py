"""The fast path's decision: the rules (modules/multi_agent/follow_up.py), then a small trained model over them.

A logistic regression over the features of modules/multi_agent/follow_up_features.py (no team in them: domain words
are read as the active agent's own or another's) gives the probability that a message follows up with the active
agent. Its weights (`follow_up_model.json` beside this file, under 1 MB) are trained by bench/train_follow_up.py on
the Schema-Guided Dialogue dataset's train split (bench/sgd/), the `dev` halves of CrossWOZ's and MultiWOZ's
validation splits and the dev parts of the project's own sets; its thresholds, per language, were chosen on SGD's dev
split and on out-of-fold predictions of the rest, for at most 2 % of topic switches taken and at most 0.5 % of what
it takes from the rules' "undecided". The model may only hold back
what the rules would let through (`keep`) and let through what they leave undecided when it is sure (`take`); a
topic-switch phrase or a correction ("不是这个") stays with the routing request, as does anything the model is unsure
of: it never guesses another agent. Deterministic, pure Python; it about doubles the rules' time (0.5-0.7 ms a
message in all on a loaded 2-core machine).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from modules.multi_agent.continuation import normalise
from modules.multi_agent.domain_vocabulary import DomainView
from modules.multi_agent.fast_path import RoutingSignals
from modules.multi_agent.follow_up import CONTINUES, UNDECIDED, Verdict, judge
from modules.multi_agent.follow_up_features import features

WEIGHTS = Path(__file__).resolve().parent / "follow_up_model.json"
FINAL_REASONS = ("empty", "emoji only", "topic-switch phrase")  # the rules' verdicts no model overrides
NAMED_FOREIGN = "w=<F>"


@dataclass(frozen=True)
class Thresholds:
    keep: float  # the probability a message the rules let through needs to stay on the fast path
    take: float  # the probability a message the rules leave undecided needs to take it


@dataclass(frozen=True)
class FollowUpModel:
    weights: Mapping[str, float]
    thresholds: Mapping[str, Thresholds]  # by the message's language: "zh" (any CJK character) or "en"

    def thresholds_for(self, names: list[str]) -> Thresholds:
        return self.thresholds["zh" if "lang=zh" in names else "en"]

    def probability(self, names: list[str]) -> float:
        z = sum(self.weights.get(n, 0.0) for n in names)
        return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> FollowUpModel:
        weights = data["weights"]
        if not isinstance(weights, dict):
            raise ValueError("follow-up model: `weights` is not a table")
        thresholds = data["thresholds"]
        if not isinstance(thresholds, dict) or set(thresholds) != {"zh", "en"}:
            raise ValueError("follow-up model: `thresholds` needs `zh` and `en`")
        return cls({str(k): float(v) for k, v in weights.items()},
                   {lang: Thresholds(float(t["keep"]), float(t["take"])) for lang, t in thresholds.items()})


@lru_cache(maxsize=4)
def load_model(path: Path = WEIGHTS) -> FollowUpModel:
    return FollowUpModel.from_json(json.loads(path.read_text(encoding="utf-8")))


def is_final(rules: Verdict, names: list[str]) -> bool:
    """Whether the rules' verdict stands whatever the model says: an empty message, a topic-switch phrase or a
    correction, and a message the rules leave undecided that names another agent's domain (`<F>`)."""
    return rules.reason in FINAL_REASONS or (not rules.continues and NAMED_FOREIGN in names)


def decide(signals: RoutingSignals, message: str, reply: str | None, domain: DomainView,
           offered: tuple[str, ...] = (), model: FollowUpModel | None = None) -> Verdict:
    """Whether `message` goes on with the active agent (arguments as `follow_up.judge`): the rules' verdict,
    held back or taken by the model."""
    rules = judge(signals, message, reply, domain, offered)
    if rules.reason in FINAL_REASONS or any(normalise(o) == normalise(message) for o in offered):
        return rules  # a chip offered after the reply fits it by construction
    names = features(signals, message, reply, domain, rules)
    if is_final(rules, names):
        return rules
    model = model or load_model()
    p, bar = model.probability(names), model.thresholds_for(names)
    if rules.continues:
        return rules if p >= bar.keep else Verdict(UNDECIDED, f"the model is unsure ({p:.2f}): {rules.reason}")
    if p >= bar.take:
        return Verdict(CONTINUES, f"the model: a follow-up ({p:.2f}; rules: {rules.reason})")
    return rules

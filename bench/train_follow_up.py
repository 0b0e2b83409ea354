"""Trains the fast path's follow-up model (modules/multi_agent/follow_up_model.py) and writes its weights.

Fitted on: the train split of the Schema-Guided Dialogue dataset (English; its multi-service dialogues, bench/sgd/,
with a team written from the schema's own descriptions), the first halves by id of CrossWOZ's and MultiWOZ 2.1's
validation splits (bench/fastpath/woz.py; CrossWOZ with its profiles' keywords and without them; their train splits
are not to be had here: over the store's 4 MiB limit), and the `dev` dialogues of bench/dialogues.json and
bench/travel_en. Thresholds chosen on: SGD's dev split (never fitted on), and 5-fold out-of-fold probabilities (folds
by dialogue) of the other fitted parts. Never read here: the second halves of CrossWOZ's and MultiWOZ's validation
splits, bench/switches.json and every `held_out` dialogue (bench/fast_path.py measures on them); the test splits of
CrossWOZ, MultiWOZ and SGD are not in the repository at all.

Each user turn after the first is one example: its features against the previous turn's agent (its last reply, its
domain view), label 1 when it goes on with that agent. A logistic regression (L2, AdaGrad, fixed order and seed: the
same file each run) is fitted; per language, the two thresholds are those that take the most follow-ups while at
most `--max-misroutes` of each set's topic switches go to the previous agent.

`--predict` also estimates each set's figures on dialogues the thresholds were not chosen on (`out_of_sample`): a
choice is optimistic on the sample it was made on, and the held-out halves are for scoring, not for choosing.

`--net K --out FILE` scores English messages by the mean of K networks instead (bench/fastpath/follow_up_net.py,
numpy; about 2 minutes a network on top): an experiment of issue 23's sixth round, not read by the shipped runtime.

Run: `.venv/bin/python bench/train_follow_up.py` (about 2 minutes); `--check` compares with the shipped file.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.fastpath.dialogue_set import Turn, load_dialogues  # noqa: E402
from bench.fastpath.follow_up_net import fit_ensemble, probabilities  # noqa: E402
from bench.fastpath.woz import CROSSWOZ, MULTIWOZ, SGD  # noqa: E402
from modules.agents.profiles import load_profiles  # noqa: E402
from modules.multi_agent.domain_vocabulary import TeamVocabulary  # noqa: E402
from modules.multi_agent.fast_path import RoutingSignals, load_routing_signals  # noqa: E402
from modules.multi_agent.follow_up import judge  # noqa: E402
from modules.multi_agent.follow_up_features import features  # noqa: E402
from modules.multi_agent.follow_up_model import WEIGHTS, is_final  # noqa: E402
from modules.tools.agent_tools import AGENT_TOOLS  # noqa: E402
from modules.tools.run_command import RUN_COMMAND  # noqa: E402

BENCH = Path(__file__).resolve().parent
EPOCHS, RATE, L2, MIN_COUNT, PRUNE, SWITCH_WEIGHT = 6, 0.2, 1e-3, 2, 0.005, 5.0
MAX_PROMOTED_SWITCHES = 0.005  # of the messages the model takes from the rules' "undecided": it must not guess
PREDICT_SPLITS = 6  # random halvings of the tune sets for `--predict`
GRID = [i / 100 for i in range(1, 100)] + [i / 1000 for i in range(991, 1000)] + [0.9995, 1.0]


@dataclass(frozen=True)
class Example:
    group: str  # the set it comes from: thresholds bound each tune set's misroutes
    dialogue: str
    lang: str
    names: tuple[str, ...]
    label: int
    rules_continue: bool
    final: bool  # a rules' verdict no model overrides


def team(profiles: Path | None, signals: RoutingSignals, use_keywords: bool) -> TeamVocabulary:
    loaded = load_profiles(profiles, {t.name for t in (RUN_COMMAND, *AGENT_TOOLS)})
    return TeamVocabulary.of(loaded, signals, use_keywords=use_keywords)


def examples(dialogues: list[list[Turn]], signals: RoutingSignals, vocabulary: TeamVocabulary, tag: str,
             split: str) -> list[Example]:
    out = []
    for turns in dialogues:
        for previous, turn in zip(turns, turns[1:], strict=False):
            if turn.split != split:
                continue
            view = vocabulary.view(previous.agent)
            rules = judge(signals, turn.user, previous.reply, view)
            names = features(signals, turn.user, previous.reply, view, rules)
            out.append(Example(tag, f"{tag}:{turn.dialogue}", turn.lang, tuple(names), int(turn.cont),
                               rules.continues, is_final(rules, names)))
    return out


def fit_set(signals: RoutingSignals) -> list[Example]:
    cw, own = CROSSWOZ.load(), load_dialogues(BENCH / "dialogues.json")
    travel = load_dialogues(BENCH / "travel_en" / "dialogues.json")
    return (examples(SGD.load(), signals, team(SGD.profiles, signals, False), "sgd", "train")
            + examples(MULTIWOZ.load(), signals, team(MULTIWOZ.profiles, signals, False), "multiwoz", "dev")
            + examples(cw, signals, team(CROSSWOZ.profiles, signals, True), "crosswoz kw", "dev")
            + examples(cw, signals, team(CROSSWOZ.profiles, signals, False), "crosswoz", "dev")
            + examples(own, signals, team(None, signals, True), "own kw", "dev")
            + examples(own, signals, team(None, signals, False), "own", "dev")
            + examples(travel, signals, team(BENCH / "travel_en" / "profiles.toml", signals, False), "travel_en",
                       "dev"))


Scorer = Callable[[list[Example]], list[float]]


def out_of_fold(data: list[Example], fitter: Callable[[list[Example], int], Scorer] | None = None,
                folds: int = 5) -> list[float]:
    """Each example's probability from a fit without its dialogue (folds by dialogue): for the parts of the fit set
    that also choose thresholds (CrossWOZ's and MultiWOZ's validation halves; their train splits are not to be had).
    `fitter(part, k)` fits on `part` for fold `k` and returns what scores the rest (default: the regression)."""
    fitter = fitter or linear_fitter
    fold = {d: i % folds for i, d in enumerate(sorted({e.dialogue.split(":", 1)[1] for e in data}))}
    probs = [0.0] * len(data)
    for k in range(folds):
        score = fitter([e for e in data if fold[e.dialogue.split(":", 1)[1]] != k], k)
        inside = [i for i, e in enumerate(data) if fold[e.dialogue.split(":", 1)[1]] == k]
        for i, p in zip(inside, score([data[i] for i in inside]), strict=True):
            probs[i] = p
    return probs


def linear_fitter(part: list[Example], k: int) -> Scorer:
    weights = fit(part, seed=k)
    return lambda rest: [probability(weights, e.names) for e in rest]


def net_fitter(seeds: list[int]) -> Callable[[list[Example], int], Scorer]:
    """The ensemble's fold fits: fold `k` of the network seeded `s` is seeded 1000 s + k + 1."""
    def fitter(part: list[Example], k: int) -> Scorer:
        nets = fit_ensemble(part, [1000 * s + k + 1 for s in seeds])
        return lambda rest: probabilities(nets, rest)
    return fitter


def tune_set(signals: RoutingSignals) -> list[Example]:
    return examples(SGD.load(), signals, team(SGD.profiles, signals, False), "sgd dev", "dev")


def fit(data: list[Example], seed: int = 0) -> dict[str, float]:
    counts: dict[str, int] = defaultdict(int)
    for e in data:
        for n in set(e.names):
            counts[n] += 1
    kept = {n for n, c in counts.items() if c >= MIN_COUNT} | {"bias"}
    w: dict[str, float] = defaultdict(float)
    g2: dict[str, float] = defaultdict(lambda: 1e-8)
    order = list(range(len(data)))
    rng = random.Random(seed)
    for _ in range(EPOCHS):
        rng.shuffle(order)
        for i in order:
            e = data[i]
            names = [n for n in e.names if n in kept]
            z = max(-30.0, min(30.0, sum(w[n] for n in names)))
            grad = (1.0 / (1.0 + math.exp(-z)) - e.label) * (1.0 if e.label else SWITCH_WEIGHT)
            for n in names:
                g = grad + L2 * w[n]
                g2[n] += g * g
                w[n] -= RATE * g / math.sqrt(g2[n])
    return {n: round(v, 4) for n, v in sorted(w.items()) if abs(v) >= PRUNE}


def probability(weights: dict[str, float], names: tuple[str, ...]) -> float:
    z = max(-30.0, min(30.0, sum(weights.get(n, 0.0) for n in names)))
    return 1.0 / (1.0 + math.exp(-z))


def _counts(part: list[tuple[Example, float]]) -> dict[str, list[int]]:
    """Per grid value t: follow-ups / switches the rules let through with p >= t (`keep*`), those they leave
    undecided with p >= t (`take*`); and those the final verdicts let through (`final*`, one value)."""
    out: dict[str, list[int]] = {}
    for group, rules_continue in (("keep", True), ("take", False)):
        inside = [(e.label, p) for e, p in part if not e.final and e.rules_continue == rules_continue]
        out[f"{group}1"] = [sum(1 for y, p in inside if y and p >= t) for t in GRID]
        out[f"{group}0"] = [sum(1 for y, p in inside if not y and p >= t) for t in GRID]
    out["final1"] = [sum(1 for e, _ in part if e.final and e.rules_continue and e.label)]
    out["final0"] = [sum(1 for e, _ in part if e.final and e.rules_continue and not e.label)]
    out["all1"] = [sum(1 for e, _ in part if e.label)]
    out["all0"] = [sum(1 for e, _ in part if not e.label)]
    return out


def thresholds(data: list[Example], probs: list[float], max_misroutes: float) -> tuple[float, float, str]:
    """The (keep, take) pair that takes the most follow-ups with each tune set's misroutes within the bound."""
    groups = sorted({e.group for e in data})
    counts = {g: _counts([(e, p) for e, p in zip(data, probs, strict=True) if e.group == g]) for g in groups}
    best: tuple[int, float, float, str] = (-1, 1.0, 1.0, "")
    for i, keep in enumerate(GRID):
        for j, take in enumerate(GRID):
            if take < keep:
                continue
            hits, summary, ok = 0, [], True
            for g in groups:
                c = counts[g]
                h = c["keep1"][i] + c["take1"][j] + c["final1"][0]
                m = c["keep0"][i] + c["take0"][j] + c["final0"][0]
                promoted = c["take0"][j] + c["take1"][j]
                ok = ok and m <= max_misroutes * c["all0"][0] and c["take0"][j] <= MAX_PROMOTED_SWITCHES * promoted
                hits += h
                summary.append(f"{g}: {h}/{c['all1'][0]} follow-ups, {m}/{c['all0'][0]} switches taken")
            if ok and hits > best[0]:
                best = (hits, keep, take, "; ".join(summary))
    return best[1], best[2], best[3]


@dataclass
class Estimate:
    """One set's counts on the halves the thresholds were not chosen on."""

    hits: int = 0
    follow_ups: int = 0
    misroutes: int = 0
    switches: int = 0

    def __str__(self) -> str:
        return (f"{100 * self.hits / max(1, self.follow_ups):.1f}% of follow-ups, "
                f"{100 * self.misroutes / max(1, self.switches):.2f}% of switches taken")


def out_of_sample(part: list[tuple[Example, float]], max_misroutes: float,
                  splits: int = PREDICT_SPLITS) -> dict[str, Estimate]:
    """What thresholds chosen as `thresholds` chooses them do on dialogues they were not chosen on: in each of
    `splits` random halvings by dialogue (fixed seeds), each half chooses and the other is counted. A choice is
    optimistic on its own sample (its bound is met by the switches that sample happens to hold); this estimate is
    what to choose with, instead of looking at the held-out halves."""
    dialogues = sorted({e.dialogue for e, _ in part})
    out: dict[str, Estimate] = {}
    for seed in range(splits):
        order = list(dialogues)
        random.Random(seed).shuffle(order)
        half = {d: i % 2 for i, d in enumerate(order)}
        for side in (0, 1):
            chosen = [(e, p) for e, p in part if half[e.dialogue] == side]
            keep, take, _ = thresholds([e for e, _ in chosen], [p for _, p in chosen], max_misroutes)
            for e, p in part:
                if half[e.dialogue] != side:
                    taken = e.rules_continue if e.final else p >= (keep if e.rules_continue else take)
                    est = out.setdefault(e.group, Estimate())
                    est.hits += int(taken and e.label == 1)
                    est.follow_ups += e.label
                    est.misroutes += int(taken and e.label == 0)
                    est.switches += 1 - e.label
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--max-misroutes", type=float, default=0.02, help="bound per tune set (0.02: the goal)")
    p.add_argument("--out", type=Path, default=WEIGHTS)
    p.add_argument("--check", action="store_true", help="fail when the shipped weights differ from a new fit")
    p.add_argument("--predict", action="store_true",
                   help="also estimate each set's figures on dialogues the thresholds were not chosen on")
    p.add_argument("--bounds", type=lambda v: [float(b) for b in v.split(",")], default=None,
                   help="with --predict: the bounds to estimate at (comma-separated; default --max-misroutes)")
    p.add_argument("--net", type=int, default=0, metavar="K",
                   help="score English messages by the mean of K networks (bench/fastpath/follow_up_net.py)")
    p.add_argument("--net-seed", type=int, default=0, help="the first network's seed (the others: the next K-1)")
    args = p.parse_args(argv)
    if args.net and args.out == WEIGHTS:
        p.error("--net needs --out: the shipped runtime reads no network (issue 23's sixth round did not ship one)")
    signals = load_routing_signals(None)
    data, tune = fit_set(signals), tune_set(signals)
    print(f"{len(data)} examples to fit ({sum(e.label for e in data)} follow-ups), {len(tune)} to tune")
    weights = fit(data)
    held = out_of_fold(data)
    tuned = [probability(weights, e.names) for e in tune]
    nets = []
    if args.net:
        seeds = list(range(args.net_seed, args.net_seed + args.net))
        english = [i for i, e in enumerate(data) if e.lang == "en"]
        nets = fit_ensemble([data[i] for i in english], seeds)
        for i, q in zip(english, out_of_fold([data[i] for i in english], net_fitter(seeds)), strict=True):
            held[i] = q
        english = [i for i, e in enumerate(tune) if e.lang == "en"]
        for i, q in zip(english, probabilities(nets, [tune[i] for i in english]), strict=True):
            tuned[i] = q
    scored = [(e, p) for e, p in zip(data, held, strict=True) if e.group != "sgd"]  # SGD has its own dev split
    scored += list(zip(tune, tuned, strict=True))
    chosen = {}
    for lang in ("en", "zh"):
        part = [(e, p) for e, p in scored if e.lang == lang]
        keep, take, summary = thresholds([e for e, _ in part], [p for _, p in part], args.max_misroutes)
        print(f"{lang}: thresholds keep {keep:.3f}, take {take:.3f}; {summary}")
        chosen[lang] = {"keep": keep, "take": take}
        for bound in (args.bounds or [args.max_misroutes]) if args.predict else []:
            estimates = out_of_sample(part, bound)
            print(f"{lang}, bound {100 * bound:.1f}%, chosen on one half of random halvings, counted on the other "
                  f"({PREDICT_SPLITS} halvings): " + "; ".join(f"{g}: {est}" for g, est in sorted(estimates.items())))
    model: dict[str, object] = {
        "about": "modules/multi_agent/follow_up_model.py; trained by bench/train_follow_up.py",
        "thresholds": chosen, "weights": weights}
    if nets:
        model["en_networks"] = [net.to_json() for net in nets]
    text = json.dumps(model, ensure_ascii=False, indent=0, sort_keys=True) + "\n"
    if args.check:
        same = args.out.read_text(encoding="utf-8") == text
        print("the shipped weights match" if same else "the shipped weights differ from a new fit")
        return 0 if same else 1
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out} ({len(model['weights'])} weights, {len(text) // 1024} kB)")  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    sys.exit(main())

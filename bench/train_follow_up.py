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
same file each run) is fitted; per language and per tie of the rules' verdict (`follow_up.Tie`: an answer to the
last reply, a reference back, no tie, a new request, another agent's shared term), the thresholds are those that take
the most follow-ups while at most `--max-misroutes` of each set's topic switches go to the previous agent.

Run: `.venv/bin/python bench/train_follow_up.py` (about 2 minutes); `--check` compares with the shipped file.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.fastpath.dialogue_set import Turn, load_dialogues  # noqa: E402
from bench.fastpath.woz import CROSSWOZ, MULTIWOZ, SGD  # noqa: E402
from modules.agents.profiles import load_profiles  # noqa: E402
from modules.multi_agent.domain_vocabulary import TeamVocabulary  # noqa: E402
from modules.multi_agent.fast_path import RoutingSignals, load_routing_signals  # noqa: E402
from modules.multi_agent.follow_up import Tie, judge  # noqa: E402
from modules.multi_agent.follow_up_features import features  # noqa: E402
from modules.multi_agent.follow_up_model import LANGUAGES, TIES, WEIGHTS, is_final  # noqa: E402
from modules.tools.agent_tools import AGENT_TOOLS  # noqa: E402
from modules.tools.run_command import RUN_COMMAND  # noqa: E402

BENCH = Path(__file__).resolve().parent
EPOCHS, RATE, L2, MIN_COUNT, PRUNE, SWITCH_WEIGHT = 6, 0.2, 1e-3, 2, 0.005, 5.0
MAX_PROMOTED_SWITCHES = 0.005  # of what the model takes from the rules' "undecided", all tune sets of a language
# together (one switch in a small set's few takes is no rate): it must not guess
GRID = (0.01, 0.5, 0.8, 0.9, 0.95, 0.97, 0.98, 0.985, 0.99, 0.993, 0.995, 0.997, 0.998, 0.999, 1.01)  # 1.01: never


@dataclass(frozen=True)
class Example:
    group: str  # the set it comes from: thresholds bound each tune set's misroutes
    dialogue: str
    lang: str
    names: tuple[str, ...]
    label: int
    rules_continue: bool
    final: bool  # a rules' verdict no model overrides
    tie: Tie  # what the rules' verdict rests on: each has its threshold


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
                               rules.continues, is_final(rules, names), rules.tie))
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


def out_of_fold(data: list[Example], folds: int = 5) -> list[float]:
    """Each example's probability from a fit without its dialogue (folds by dialogue): for the parts of the fit set
    that also choose thresholds (CrossWOZ's and MultiWOZ's validation halves; their train splits are not to be had)."""
    fold = {d: i % folds for i, d in enumerate(sorted({e.dialogue.split(":", 1)[1] for e in data}))}
    probs = [0.0] * len(data)
    for k in range(folds):
        weights = fit([e for e in data if fold[e.dialogue.split(":", 1)[1]] != k], seed=k)
        for i, e in enumerate(data):
            if fold[e.dialogue.split(":", 1)[1]] == k:
                probs[i] = probability(weights, e.names)
    return probs


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


@dataclass
class _Tally:
    """One tune set's counts: per tie and grid value, follow-ups and switches with p at or above it; and those the
    final verdicts let through, which no threshold changes."""

    follow_ups: dict[Tie, list[int]]
    switches: dict[Tie, list[int]]
    final_hits: int
    final_misroutes: int
    all_follow_ups: int
    all_switches: int


def _tally(part: list[tuple[Example, float]]) -> _Tally:
    follow_ups = {t: [0] * len(GRID) for t in TIES}
    switches = {t: [0] * len(GRID) for t in TIES}
    for e, p in part:
        if not e.final:
            for i, t in enumerate(GRID):
                if p >= t:
                    (follow_ups if e.label else switches)[e.tie][i] += 1
    return _Tally(follow_ups, switches, sum(1 for e, _ in part if e.final and e.rules_continue and e.label),
                  sum(1 for e, _ in part if e.final and e.rules_continue and not e.label),
                  sum(e.label for e, _ in part), sum(1 - e.label for e, _ in part))


def thresholds(data: list[Example], probs: list[float], max_misroutes: float) -> tuple[dict[Tie, float], str]:
    """The threshold per tie that takes the most follow-ups with each tune set's misroutes within the bound and at
    most MAX_PROMOTED_SWITCHES of what is taken from the rules' "undecided" a switch, over all the sets: an exhaustive
    search over GRID, pruned (a threshold that raises a set's misroutes over the bound or cannot beat the best is not
    followed); of equal hits, the higher thresholds."""
    groups = sorted({e.group for e in data})
    tallies = [_tally([(e, p) for e, p in zip(data, probs, strict=True) if e.group == g]) for g in groups]
    undecided = {e.tie for e in data if not e.rules_continue and not e.final}
    bounds = [max_misroutes * t.all_switches for t in tallies]
    best_hits, best = -1, (len(GRID) - 1,) * len(TIES)

    def search(k: int, chosen: tuple[int, ...], misroutes: list[int], hits: int) -> None:
        nonlocal best_hits, best
        if hits + sum(t.follow_ups[tie][0] for t in tallies for tie in TIES[k:]) <= best_hits:
            return
        if k == len(TIES):
            taken = [(t.switches[tie][i], t.follow_ups[tie][i]) for t in tallies
                     for tie, i in zip(TIES, chosen, strict=True) if tie in undecided]
            if sum(s for s, _ in taken) <= MAX_PROMOTED_SWITCHES * sum(s + f for s, f in taken):
                best_hits, best = hits, chosen
            return
        tie = TIES[k]
        for i in reversed(range(len(GRID))):  # from "never" down: of equal hits, the higher threshold
            more = [m + t.switches[tie][i] for m, t in zip(misroutes, tallies, strict=True)]
            if any(m > b for m, b in zip(more, bounds, strict=True)):
                break  # a lower threshold takes as many switches or more
            search(k + 1, (*chosen, i), more, hits + sum(t.follow_ups[tie][i] for t in tallies))

    search(0, (), [t.final_misroutes for t in tallies], sum(t.final_hits for t in tallies))
    chosen, summary = best, []
    for g, t in zip(groups, tallies, strict=True):
        h = t.final_hits + sum(t.follow_ups[tie][i] for tie, i in zip(TIES, chosen, strict=True))
        m = t.final_misroutes + sum(t.switches[tie][i] for tie, i in zip(TIES, chosen, strict=True))
        summary.append(f"{g}: {h}/{t.all_follow_ups} follow-ups, {m}/{t.all_switches} switches taken")
    return {tie: GRID[i] for tie, i in zip(TIES, chosen, strict=True)}, "; ".join(summary)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--max-misroutes", type=float, default=0.02, help="bound per tune set (0.02: the goal)")
    p.add_argument("--out", type=Path, default=WEIGHTS)
    p.add_argument("--check", action="store_true", help="fail when the shipped weights differ from a new fit")
    args = p.parse_args(argv)
    signals = load_routing_signals(None)
    data, tune = fit_set(signals), tune_set(signals)
    print(f"{len(data)} examples to fit ({sum(e.label for e in data)} follow-ups), {len(tune)} to tune")
    weights = fit(data)
    held = out_of_fold(data)
    scored = [(e, p) for e, p in zip(data, held, strict=True) if e.group != "sgd"]  # SGD has its own dev split
    scored += [(e, probability(weights, e.names)) for e in tune]
    chosen = {}
    for lang in LANGUAGES:
        part = [(e, p) for e, p in scored if e.lang == lang]
        by_tie, summary = thresholds([e for e, _ in part], [p for _, p in part], args.max_misroutes)
        print(f"{lang}: thresholds {', '.join(f'{t} {v:g}' for t, v in by_tie.items())}; {summary}")
        chosen[lang] = {str(t): v for t, v in by_tie.items()}
    model = {"about": "modules/multi_agent/follow_up_model.py; trained by bench/train_follow_up.py",
             "thresholds": chosen, "weights": weights}
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

"""Benchmark: the fast path to the active agent, beside one combined routing request and the full pipeline.

Part 1, latency. Real servers (`run.py`, eventlet, SQLite in a temp dir) against a scripted
model that streams like a real one: every request waits `--ttft-ms` (default 200) for its
first token, then sends about one token (two characters) every `--token-ms` (default 20).
The same continuation messages go, interleaved, by the fast path, by one combined routing
request (rewrite and intent in one answer, the default) and by the seed's full pipeline
(query rewriting, then intent recognition; `ROUTING_STAGES=separate` on a second server),
and the ratio fast path / full pipeline is printed for the first token of the reply and
for the reply done. Then the acknowledgement: POST /api/tasks to new conversations with a
model that takes `--ack-model-ms` (default 1000) per request; the ack does not wait for it.

Part 2, hit rate over bench/dialogues.json (hand-labelled Chinese and English dialogues,
split into `dev`, read while the rules were written, and `held_out`, never tuned on),
bench/switches.json (short requests that switch agent, corrections; held out) and
bench/travel_en/ (English, a description-only team; `dev` and `held_out`), Part 3 over
CrossWOZ's validation split (bench/crosswoz/, labels from its dialogue acts, one agent per
domain; its own `dev` and `held_out` halves), Part 3b over MultiWOZ 2.1's (bench/multiwoz/,
labelled alike, English) and Part 3c over SGD's dev split (bench/sgd/, English, where the English thresholds
of the follow-up model were chosen). Each set is scored with its profiles' `keywords` and without
them (every agent's domain is read from its profile's text). For each: hit rate (intended
continuations that take the fast path), misroutes (the fast path to an agent other than the
labelled one), the fast path on topic switches, and routing requests before the agent per
turn (0 on the fast path, 1 for the combined request), typed and with suggestion chips
clicked (the chip's word replaces the typed text where the set marks one). The predictions
call the product's own rules; then the typed turns are replayed through a real server and
every route it returns is compared with the prediction (the run fails on a mismatch). On the WOZ sets, a
misroute to the agent whose domain the dataset's own reply before it already acted in (its system had moved
on: the turn answers that reply) is counted as a misroute, and also apart.

Run: `.venv/bin/python bench/fast_path.py` (or `make bench`); `--quick` for a smoke run; `--sets-only` for the
scores of the labelled sets without any server;
`--crosswoz-replay N` dialogues of CrossWOZ's held-out half replayed (default 40); `--help`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `python bench/fast_path.py` puts bench/ first, not the project
    sys.path.insert(0, str(ROOT))

from bench.fastpath import latency  # noqa: E402
from bench.fastpath.dialogue_set import SPLITS, Outcome, Turn, load_dialogues, score, simulate  # noqa: E402
from bench.fastpath.model import StreamingModel  # noqa: E402
from bench.fastpath.replay import BenchError, Replay, replay  # noqa: E402
from bench.fastpath.woz import CROSSWOZ, MULTIWOZ, SGD  # noqa: E402
from modules.agents.profiles import load_profiles  # noqa: E402
from modules.multi_agent.domain_vocabulary import TeamVocabulary  # noqa: E402
from modules.multi_agent.fast_path import RoutingSignals, load_routing_signals  # noqa: E402
from modules.tools.agent_tools import AGENT_TOOLS  # noqa: E402
from modules.tools.run_command import RUN_COMMAND  # noqa: E402
from test.conftest import ServerProcess  # noqa: E402
from test.scripted_llm import ScriptedLLMServer  # noqa: E402

DIALOGUES = Path(__file__).resolve().parent / "dialogues.json"
SWITCHES = Path(__file__).resolve().parent / "switches.json"
TRAVEL_EN = Path(__file__).resolve().parent / "travel_en"


def _width(s: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in s)


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    cells = [[str(c) for c in row] for row in rows]
    widths = [max([_width(h)] + [_width(r[i]) for r in cells]) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        return " | ".join((v + " " * (w - _width(v))) if i == 0 else (" " * (w - _width(v)) + v)
                          for i, (v, w) in enumerate(zip(values, widths, strict=True))).rstrip()

    print(line(headers))
    print("-+-".join("-" * w for w in widths))
    for row in cells:
        print(line(row))


def rate(part: int, whole: int) -> str:
    return f"{part}/{whole} = {100 * part / whole:.1f}%" if whole else "-"


def vocabularies(profiles_path: Path | None, signals: RoutingSignals) -> dict[str, TeamVocabulary]:
    """The team's domain terms read from its profiles, with their `keywords` and from their text alone."""
    profiles = load_profiles(profiles_path, {t.name for t in (RUN_COMMAND, *AGENT_TOOLS)})
    return {"keywords": TeamVocabulary.of(profiles, signals),
            "no keywords": TeamVocabulary.of(profiles, signals, use_keywords=False)}


# -- reports -----------------------------------------------------------------------------------


def report_part1(samples: dict[str, list[latency.Sample]], ttft_ms: float, token_ms: float) -> None:
    print(f"\nPart 1: one continuation, same run (every request: first token after {ttft_ms:g} ms, then a token "
          f"every {token_ms:g} ms)\n")
    rows = []
    for mode, ss in samples.items():
        times = (latency.median([getattr(s, f) for s in ss]) for f in ("ack_ms", "first_ms", "done_ms"))
        rows.append([mode, len(ss), f"{statistics.mean(len(s.kinds) for s in ss):g}", *(f"{t:.0f}" for t in times)])
    print_table(["route", "messages", "model requests", "ack ms", "first token ms", "reply done ms"], rows)
    fast, one, full = (samples[m] for m in latency.MODES)
    for name, other in (("full pipeline", full), ("one routing request", one)):
        first = latency.median([s.first_ms for s in fast]) / latency.median([s.first_ms for s in other])
        done = latency.median([s.done_ms for s in fast]) / latency.median([s.done_ms for s in other])
        print(f"latency fast path / {name}: first token x{first:.2f}, reply done x{done:.2f}")


def report_ack(acks: list[float], model_ms: float, where: str) -> None:
    ordered = sorted(acks)
    print(f"acknowledgement of POST /api/tasks ({where}; model {model_ms:g} ms per request, routing after the ack): "
          f"p50 {statistics.median(ordered):.1f} ms, p90 {ordered[round(0.9 * (len(ordered) - 1))]:.1f} ms, "
          f"max {ordered[-1]:.1f} ms over {len(ordered)} sends")


def score_rows(name: str, outcomes: list[Outcome]) -> list[str]:
    s = score(outcomes)
    return [name, s.turns, rate(s.hits, s.continuations), rate(s.misroutes, s.switches),
            rate(s.fast_on_switches, s.switches), f"{s.pre_agent_requests:.2f}"]


SCORE_HEADERS = ["set", "turns", "hit rate (continuations)", "misroutes (of switches)", "fast path on switches",
                 "routing requests / turn"]


def report_set(title: str, dialogues: list[list[Turn]], signals: RoutingSignals,
               vocabularies: dict[str, TeamVocabulary]) -> list[Outcome]:
    """Prints the set's scores by split and language, with the profiles' keywords and without, typed and with
    chips, and the decision's time per message; returns the typed outcomes with keywords."""
    print(f"\n{title}\n")
    rows, result = [], []
    for label, vocabulary in vocabularies.items():
        started = time.perf_counter()
        typed_all = simulate(dialogues, signals, vocabulary, clicks=False)
        per_message_us = (time.perf_counter() - started) / max(1, len(typed_all)) * 1e6
        clicked_all = simulate(dialogues, signals, vocabulary, clicks=True)
        result = result or typed_all
        langs = sorted({o.turn.lang for o in typed_all})
        for split in (*SPLITS, None):
            for lang in (*langs, None) if len(langs) > 1 else (None,):
                def keep(o: Outcome, split: str | None = split, lang: str | None = lang) -> bool:
                    return (split is None or o.turn.split == split) and (lang is None or o.turn.lang == lang)
                typed = [o for o in typed_all if keep(o)]
                if not typed:
                    continue
                name = f"{label}: {split or 'all'}{', ' + lang if lang else ''}"
                rows.append(score_rows(f"{name}, typed", typed) + [f"{per_message_us:.0f}"])
                if any(o.turn.chip for o in typed):
                    rows.append(score_rows(f"{name}, with chips", [o for o in clicked_all if keep(o)]) + [""])
        bad = [o for o in typed_all if o.misroute]
        shown = [o for o in bad if o.turn.split == "dev"]  # held-out turns are counted, never read
        after = [o for o in bad if o.follows_the_reply]  # counted as misroutes all the same
        apart = f"to the agent the dataset's reply had already acted for: {len(after)}, " \
                f"{sum(o.turn.split != 'dev' for o in after)} not in dev"
        print(f"misroutes typed, {label} ({len(bad)}; of the dev split {len(shown)}; {apart}): " + ("; ".join(
            f"{o.text!r} ({o.previous_agent} -> {o.turn.agent}, {o.reason})" for o in shown[:8]) or "none"))
    print_table([*SCORE_HEADERS, "decision us / message"], rows)
    return result


def report_replay(name: str, r: Replay) -> None:
    print(f"replayed on the server ({name}): {r.turns} turns, fast path {r.fast} (predicted {r.predicted_fast}), "
          f"misroutes {r.misroutes}, routing requests / turn {r.stage_requests / max(1, r.turns):.2f}, "
          f"mismatches {len(r.mismatches)}, {r.seconds:.0f} s")
    for line in r.mismatches[:20]:
        print(f"  MISMATCH {line}")
    if r.mismatches:
        raise BenchError(f"{len(r.mismatches)} routes differ from the prediction")


# -- main ----------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--ttft-ms", type=float, default=200.0, help="model: time to the first token (default 200)")
    p.add_argument("--token-ms", type=float, default=20.0, help="model: time per further token (default 20)")
    p.add_argument("--ack-model-ms", type=float, default=1000.0, help="model delay while acks are timed")
    p.add_argument("--messages", type=int, default=len(latency.CONTINUATIONS), help="messages per route, part 1")
    p.add_argument("--dialogues", type=Path, default=DIALOGUES, help="the dialogue set (bench/dialogues.json)")
    p.add_argument("--crosswoz-replay", type=int, default=40, help="CrossWOZ held-out dialogues replayed (40)")
    p.add_argument("--no-replay", action="store_true", help="predictions only, no replay on the server")
    p.add_argument("--sets-only", action="store_true", help="the labelled sets' predictions only: no server")
    p.add_argument("--quick", action="store_true", help="smoke run: 4 messages, few replayed dialogues")
    p.add_argument("--keep", action="store_true", help="keep the temp dir (server logs, databases)")
    return p.parse_args(argv)


def report_sets(args: argparse.Namespace, signals: RoutingSignals) -> tuple[list[list[Turn]], list[Outcome],
                                                                            list[list[Turn]], list[Outcome]]:
    """Parts 2 and 3: every labelled set's scores; returns dialogues.json and CrossWOZ with their outcomes."""
    dialogues = load_dialogues(args.dialogues)
    typed = report_set(f"Part 2: {args.dialogues.name}, {len(dialogues)} dialogues, "
                       f"{sum(len(d) for d in dialogues)} user turns", dialogues, signals, vocabularies(None, signals))
    switches = load_dialogues(SWITCHES)
    report_set(f"Part 2b: {SWITCHES.name}, short requests that switch agent and corrections, {len(switches)} "
               "dialogues, all held out", switches, signals, vocabularies(None, signals))
    travel = load_dialogues(TRAVEL_EN / "dialogues.json")
    report_set(f"Part 2c: travel_en, English travel dialogues with a description-only team ({len(travel)} "
               "dialogues; the profiles have no keywords: both rows read the descriptions)", travel, signals,
               vocabularies(TRAVEL_EN / "profiles.toml", signals))
    cw = CROSSWOZ.load()
    cw_typed = report_set(f"Part 3: CrossWOZ validation split ({CROSSWOZ.data.name}), {len(cw)} dialogues, "
                          f"{sum(len(d) for d in cw)} user turns; no chips (the set has none)", cw, signals,
                          vocabularies(CROSSWOZ.profiles, signals))
    mw = MULTIWOZ.load()
    report_set(f"Part 3b: MultiWOZ 2.1 validation split ({MULTIWOZ.data.name}), {len(mw)} dialogues, "
               f"{sum(len(d) for d in mw)} user turns, English; a description-only team (both rows alike)", mw,
               signals, vocabularies(MULTIWOZ.profiles, signals))
    sgd = [d for d in SGD.load() if d[0].split == "dev"]
    report_set(f"Part 3c: SGD dev split (bench/sgd/; the English thresholds were chosen on it), {len(sgd)} "
               f"multi-service dialogues, {sum(len(d) for d in sgd)} user turns; a team from the schema's descriptions",
               sgd, signals, vocabularies(SGD.profiles, signals))
    return dialogues, typed, cw, cw_typed


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signals_path = Path(os.environ["ROUTING_SIGNALS"]) if os.environ.get("ROUTING_SIGNALS") else None
    signals = load_routing_signals(signals_path)
    if args.sets_only:
        report_sets(args, signals)
        return 0
    messages = [latency.CONTINUATIONS[i % len(latency.CONTINUATIONS)] for i in range(4 if args.quick
                                                                                     else args.messages)]
    tmp = Path(tempfile.mkdtemp(prefix="bench-fast-path-"))
    llm = ScriptedLLMServer().start()
    servers: list[ServerProcess] = []
    started, load_before = time.monotonic(), os.getloadavg()[0]

    def server(name: str, **env: str) -> ServerProcess:
        unlimited = {f"RATE_LIMIT_{kind}_PER_MIN": "100000000" for kind in ("SENDS", "CONVERSATIONS", "SOCKET_EVENTS")}
        servers.append(ServerProcess(tmp / name, llm.base_url, env={**unlimited, **env}).start())
        return servers[-1]

    try:
        combined, separate = server("combined"), server("separate", ROUTING_STAGES="separate")
        model = StreamingModel(llm, args.ttft_ms / 1000, args.token_ms / 1000)
        model.install()
        print(f"bench/fast_path: run.py (eventlet, SQLite in {tmp}) against a streaming scripted model; "
              f"{os.cpu_count()} CPUs, load average {load_before:.2f} at start", flush=True)
        report_part1(latency.run_part1(combined, separate, llm, model, messages), args.ttft_ms, args.token_ms)
        model.ttft_s, model.token_s = args.ack_model_ms / 1000, 0.0
        print()
        n = 4 if args.quick else 20
        report_ack(latency.run_ack(combined, llm, model, n, None), args.ack_model_ms, "a new conversation each")
        cid = combined.send("hello")["conversation_id"]
        report_ack(latency.run_ack(combined, llm, model, n // 2, cid), args.ack_model_ms, "one conversation")
        model.ttft_s = 0.0

        dialogues, typed, cw, cw_typed = report_sets(args, signals)
        if not args.no_replay:
            chosen = typed if not args.quick else [o for o in typed if o.turn.dialogue in
                                                   {d[0].dialogue for d in dialogues[:6]}]
            report_replay("typed", replay(combined, llm, model, chosen))

        typed = cw_typed
        if not args.no_replay and args.crosswoz_replay:
            held = [d for d in cw if d[0].split == "held_out"][: 3 if args.quick else args.crosswoz_replay]
            chosen_ids = {d[0].dialogue for d in held}
            cw_server = server("crosswoz", AGENT_PROFILES=str(CROSSWOZ.profiles))
            r = replay(cw_server, llm, model, [o for o in typed if o.turn.dialogue in chosen_ids])
            report_replay(f"{len(held)} held-out dialogues", r)
        load_after = os.getloadavg()[0]
        print(f"\ntotal {time.monotonic() - started:.0f} s; load average {load_before:.2f} at start, "
              f"{load_after:.2f} at the end")
        if load_before > 0.5 * (os.cpu_count() or 1):
            print("warning: the machine was busy with other work; the latencies (not the counts) are inflated")
        return 0
    except BenchError as exc:
        print(f"\nbenchmark failed: {exc}", file=sys.stderr)
        return 1
    finally:
        for s in servers:
            s.stop()
        llm.stop()
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark: the fast path to the active agent beside the full pipeline (DESIGN.md §5).

Part 1, latency and model requests. One real server (`run.py`, eventlet, SQLite in a temp
dir) talks to the scripted model server (test/scripted_llm.py), where EVERY request (query
rewriting, intent recognition, the agent's turn, the suggestion call) answers after the same
fixed delay (`--delay-ms`, default 200 ms) with its whole text in one chunk. Two conversations
open with the same policy question, which the pipeline routes to InfoAgent. Then the same
continuation messages ("确认", "继续", "ok", ...) go to both, interleaved:

- `fast path`: conversation A as it is (InfoAgent is the active agent);
- `pipeline`: conversation B, whose active agent (session store row `{cid}:router` /
  `activeAgent`) is deleted from the database just before each message, so the very same
  text takes query rewriting -> intent recognition (answering InfoAgent) -> InfoAgent.

For each message: `ack` = POST /api/tasks until its 202 (the routing decision, stages
included, runs inside it); `first token` and `reply done` = POST until the task's first
`text_chunk` / last `text_end` event (their server-side `ts`, so polling does not blur them);
the model requests it caused until the reply was done, and the asynchronous suggestion call
after the reply, counted on its own (the benchmark waits for the `suggestions` event before
the next message, so no call leaks into the next message's count). `overhead` = reply done
minus (requests before the reply x delay): the server's own time. A short check then clicks
the suggestion chips of the last reply: the quick-action chip must take the fast path, a
free-text chip the pipeline.

Part 2, hit rate, over the dialogue set bench/dialogues.json (281 user turns in 40 Chinese
and English conversations, each turn labelled: does the user mean to go on with the agent
that handled the previous turn, and which quick-action chip, if any, says all they mean).
Hit rate = intended continuations that take the fast path (an active agent is present, which
is every turn but a conversation's first, and `RoutingSignals.is_continuation(text)`); false
hits = fast path taken on a topic switch. Computed with the product's own function (pure), for
typed text and with suggestion clicks (the chip's word replaces the typed text where the set
marks one; every marked chip clicked, so an upper bound). Then every dialogue is replayed
through the same real server as typed (model delay 0, the intent stage answering the turn's
labelled agent), and every distinct chip word is clicked in one more conversation; each
`route` the server returns is compared with the prediction (the run fails on a mismatch).

Run: `.venv/bin/python bench/fast_path.py` (or `make bench`); `--quick` for a smoke run;
`--signals FILE` to evaluate another word list (also given to the server); `--help` for the
rest. About 50 s on 2 cores; the temp dir and the server process are removed at the end
(`--keep` keeps the temp dir with the server log and database).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `python bench/fast_path.py` puts bench/ first, not the project
    sys.path.insert(0, str(ROOT))

from modules.multi_agent.fast_path import (  # noqa: E402
    _SEPARATORS,  # the product's separators, to name one reason of a miss exactly
    MAX_CONTINUATION_CHARS,
    RoutingSignals,
    load_routing_signals,
    normalise,
)
from test.conftest import FINAL_STATUSES, ServerProcess  # noqa: E402
from test.scripted_llm import ScriptedLLMServer, TextStep, dynamic, is_stage_request, text  # noqa: E402

DIALOGUES = Path(__file__).resolve().parent / "dialogues.json"
REWRITE_MARK = "You are QueryRewritingAgent"
INTENT_MARK = "You are IntentRecognitionAgent"
SUGGEST_MARK = "You suggest what the user may want to say next"
QUICK_LINE = "Quick-action words (use them exactly as written):"
OPENER = "帮我查一下杭州的差旅政策"
FREE_CHIP = "上海的住宿标准包含早餐吗？"
CONTINUATIONS = ["确认", "继续", "好的", "ok", "好的，继续", "没问题", "yes", "可以", "嗯嗯", "confirm", "行",
                 "go ahead", "是的", "continue", "对", "同意"]
KINDS = ("new", "follow_up", "choose", "confirm", "ack", "go_on", "correct", "cancel", "redo", "all_none", "switch")
FAST, PIPELINE = "fast_path", "pipeline"


class BenchError(RuntimeError):
    """The product did not behave as the measurement assumes (wrong route, failed task, timeout)."""


# -- the scripted model: every request answers after the same delay ----------------------------


class _Deadline(threading.Event):
    """An event that sets itself `seconds` after its creation (the request's receipt).

    The scripted server holds a step until its `wait` event is set, outside its lock, so
    concurrent requests are delayed independently (a sleep in a `dynamic` builder would run
    under the server's lock and serialise them).
    """

    def __init__(self, seconds: float):
        super().__init__()
        self._at = time.monotonic() + seconds

    def is_set(self) -> bool:
        return time.monotonic() >= self._at

    def wait(self, timeout: float | None = None) -> bool:
        remaining = self._at - time.monotonic()
        if remaining > 0:
            time.sleep(remaining if timeout is None else min(remaining, timeout))
        return self.is_set()


def _system(body: dict) -> str:
    first = next((m for m in body.get("messages", []) if isinstance(m, dict) and m.get("role") == "system"), {})
    content = first.get("content")
    return content if isinstance(content, str) else ""


def _last_user(body: dict) -> str:
    users = [m for m in body.get("messages", []) if isinstance(m, dict) and m.get("role") == "user"]
    content = users[-1].get("content") if users else ""
    return content if isinstance(content, str) else ""


def request_kind(body: dict) -> str:
    system = _system(body)
    if REWRITE_MARK in system:
        return "rewrite"
    if INTENT_MARK in system:
        return "intent"
    if SUGGEST_MARK in system:
        return "suggest"
    return "agent"


class DelayedModel:
    """Answers every request after `delay_s`: the rewrite echoes the message, intent recognition
    names `intent_agent`, the suggestion call offers a quick-action chip, a modify chip and a
    free-text question, an agent acknowledges the message."""

    def __init__(self, llm: ScriptedLLMServer, delay_s: float):
        self.llm = llm
        self.delay_s = delay_s
        self.intent_agent = "InfoAgent"

    def install(self) -> None:
        self.llm.set_default(dynamic(self.respond))  # agents' turns
        self.top_up()

    def top_up(self) -> None:
        """Stage calls take only queued steps whose match names them: keep a few queued (an agent's
        request scans the queue under the scripted server's lock, so the queue stays short)."""
        if self.llm.pending_steps() < 10:
            self.llm.script(*[dynamic(self.respond)] * 20, match=is_stage_request)

    def respond(self, body: dict) -> TextStep:
        kind, last = request_kind(body), _last_user(body)
        if kind == "rewrite":
            content = last.rpartition("Latest message:")[2].strip() or last
        elif kind == "intent":
            content = json.dumps({"agent": self.intent_agent})
        elif kind == "suggest":
            content = json.dumps({"questions": self.chips(_system(body))}, ensure_ascii=False)
        else:
            name = _system(body).removeprefix("You are ").split(" ", 1)[0]
            content = f"{name}: 已处理「{last[:40]}」。"
        wait = _Deadline(self.delay_s) if self.delay_s > 0 else None
        return text(content, chunk_size=max(1, len(content)), wait=wait)

    @staticmethod
    def chips(system: str) -> list[str]:
        line = next((ln for ln in system.splitlines() if ln.startswith(QUICK_LINE)), "")
        quick = [w.strip() for w in line.removeprefix(QUICK_LINE).split(",") if w.strip()]
        ack = next((w for w in ("好的", "确认") if w in quick), quick[0] if quick else "好的")
        modify = next((w for w in ("修改", "补充") if w in quick and w != ack), None)
        return [ack, *([modify] if modify else []), FREE_CHIP]


# -- part 1: latency and model requests on the real server ------------------------------------


@dataclass
class Sample:
    mode: str
    message: str
    route: str
    target: str
    ack_ms: float
    agent_call_ms: float  # the agent's model request received
    first_ms: float
    done_ms: float
    kinds: list[str]  # model requests until the reply was done, in order
    suggest_calls: int  # after the reply (asynchronous)
    suggest_gap_ms: float | None  # text_end -> the suggestion call's receipt
    questions: list[str] = field(default_factory=list)

    @property
    def requests(self) -> int:
        return len(self.kinds)


def poll_task(server: ServerProcess, task_id: str, *, until_suggestions: bool, timeout: float = 30) -> dict:
    """The task once final (and, if asked, once its `suggestions` event arrived or 5 s passed)."""
    deadline = time.monotonic() + timeout
    events: list[dict] = []
    offset, final_at = 0, None
    while time.monotonic() < deadline:
        body = server.get(f"/api/tasks/{task_id}?from={offset}").json()
        events.extend(body["events"])
        offset = body["next_offset"]
        if body["status"] in FINAL_STATUSES:
            final_at = final_at or time.monotonic()
            if not until_suggestions or any(e["type"] == "suggestions" for e in events) \
                    or time.monotonic() - final_at > 5:
                return {**body, "events": events}
        time.sleep(0.02)
    raise BenchError(f"task {task_id} not final within {timeout:g} s: {[e['type'] for e in events]}")


def send_and_measure(server: ServerProcess, llm: ScriptedLLMServer, model: DelayedModel, cid: str | None,
                     message: str, mode: str) -> tuple[Sample, str]:
    model.top_up()
    before = len(llm.requests)
    t0 = time.time()
    sent = server.send(message, cid)
    ack = time.time()
    task = poll_task(server, sent["task_id"], until_suggestions=True)
    if task["status"] != "succeeded":
        raise BenchError(f"{mode} {message!r}: task {task['status']}\n{server.log_text()}")
    events = task["events"]
    chunks = [e["ts"] for e in events if e["type"] == "text_chunk"]
    ends = [e["ts"] for e in events if e["type"] == "text_end"]
    suggestion = next((e for e in events if e["type"] == "suggestions"), None)
    if not chunks or not ends:
        raise BenchError(f"{mode} {message!r}: no reply text in {[e['type'] for e in events]}")
    done = ends[-1]
    reqs = llm.requests[before:]
    main = [r for r in reqs if request_kind(r.body) != "suggest"]
    late = [r for r in main if r.received_wall > done]
    if late:
        raise BenchError(f"{mode} {message!r}: {len(late)} model request(s) after the reply, not counted")
    suggests = [r for r in reqs if request_kind(r.body) == "suggest"]
    gap = (min(r.received_wall for r in suggests) - done) * 1000 if suggests else None
    agent_call = next((r.received_wall for r in main if request_kind(r.body) == "agent"), done)
    sample = Sample(mode, message, sent["route"], sent["target_agent"], ack_ms=(ack - t0) * 1000,
                    agent_call_ms=(agent_call - t0) * 1000, first_ms=(chunks[0] - t0) * 1000,
                    done_ms=(done - t0) * 1000, kinds=[request_kind(r.body) for r in main],
                    suggest_calls=len(suggests), suggest_gap_ms=gap,
                    questions=suggestion["data"]["questions"] if suggestion else [])
    return sample, sent["conversation_id"]


def clear_active_agent(db_path: Path, conversation_id: str) -> None:
    with sqlite3.connect(db_path, timeout=10) as db:
        gone = db.execute("DELETE FROM session_store WHERE key = ? AND field = 'activeAgent'",
                          (f"{conversation_id}:router",)).rowcount
    if gone != 1:
        raise BenchError(f"no active agent row for conversation {conversation_id}")


def expect(sample: Sample, route: str, target: str, kinds: list[str]) -> None:
    if sample.route != route or sample.target != target or sample.kinds != kinds:
        raise BenchError(f"{sample.mode} {sample.message!r}: route {sample.route} to {sample.target} with requests "
                         f"{sample.kinds}; expected {route} to {target} with {kinds}")


@dataclass
class Part1:
    fast: list[Sample]
    pipeline: list[Sample]
    clicks: list[tuple[str, Sample]]  # (which chip, its sample)


def run_part1(server: ServerProcess, llm: ScriptedLLMServer, model: DelayedModel, signals: RoutingSignals,
              messages: list[str]) -> Part1:
    model.intent_agent = "InfoAgent"
    opened_a, cid_a = send_and_measure(server, llm, model, None, OPENER, "setup")
    opened_b, cid_b = send_and_measure(server, llm, model, None, OPENER, "setup")
    target = opened_a.target
    for opened in (opened_a, opened_b):
        expect(opened, PIPELINE, target, ["rewrite", "intent", "agent"])
    fast: list[Sample] = []
    pipeline: list[Sample] = []
    for i, message in enumerate(messages):
        for mode in (FAST, PIPELINE) if i % 2 == 0 else (PIPELINE, FAST):  # alternate who goes first
            if mode == FAST:
                sample, _ = send_and_measure(server, llm, model, cid_a, message, mode)
                expect(sample, FAST, target, ["agent"])
                fast.append(sample)
            else:
                clear_active_agent(server.data_dir / "app.db", cid_b)
                sample, _ = send_and_measure(server, llm, model, cid_b, message, mode)
                expect(sample, PIPELINE, target, ["rewrite", "intent", "agent"])
                pipeline.append(sample)
    # click the chips the product offered after the last fast-path reply
    offered = fast[-1].questions
    quick = next((q for q in offered if q in signals.quick_actions()), None)
    free = next((q for q in offered if not signals.is_continuation(q)), None)
    if quick is None or free is None:
        raise BenchError(f"the suggestions {offered} lack a quick-action or a free-text chip")
    clicks = []
    for label, chip, route, kinds in (("quick-action chip", quick, FAST, ["agent"]),
                                      ("free-text chip", free, PIPELINE, ["rewrite", "intent", "agent"])):
        sample, _ = send_and_measure(server, llm, model, cid_a, chip, f"click {label}")
        expect(sample, route, target, kinds)
        clicks.append((label, sample))
    return Part1(fast, pipeline, clicks)


# -- part 2: hit rate over the dialogue set -----------------------------------------------------


@dataclass(frozen=True)
class Turn:
    dialogue: str
    lang: str
    index: int
    user: str
    kind: str
    agent: str
    cont: bool
    chip: str | None
    note: str | None


def load_dialogues(path: Path) -> list[list[Turn]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    dialogues: list[list[Turn]] = []
    seen: set[str] = set()
    for d in data["dialogues"]:
        did, turns = d["id"], []
        if did in seen:
            raise ValueError(f"{path}: dialogue id {did} twice")
        seen.add(did)
        for i, t in enumerate(d["turns"]):
            turn = Turn(did, d["lang"], i, t["user"], t["kind"], t["agent"], bool(t["continue"]), t.get("chip"),
                        t.get("note"))
            where = f"{path}: {did} turn {i + 1}"
            if turn.kind not in KINDS:
                raise ValueError(f"{where}: unknown kind {turn.kind!r}")
            if (i == 0) != (turn.kind == "new") or (i == 0 and turn.cont):
                raise ValueError(f"{where}: a dialogue opens with one `new` turn that does not continue")
            if turn.cont and turn.agent != turns[-1].agent:
                raise ValueError(f"{where}: continues, yet names {turn.agent}, not {turns[-1].agent}")
            if turn.cont == (turn.kind == "switch") and turn.kind != "new":
                raise ValueError(f"{where}: kind {turn.kind} with continue={turn.cont}")
            if turn.chip is not None and not turn.cont:
                raise ValueError(f"{where}: a chip on a turn that does not continue")
            turns.append(turn)
        dialogues.append(turns)
    return dialogues


def why_not(signals: RoutingSignals, message: str) -> str:
    """'hit', or why `is_continuation` says no (the product's own answer decides; this only names it)."""
    if signals.is_continuation(message):
        return "hit"
    norm = normalise(message)
    if not norm:
        return "empty after normalising"
    if len(norm) > MAX_CONTINUATION_CHARS:
        return "too long"
    if any(phrase in norm for phrase in signals.topic_switch):
        return "topic-switch veto"
    if _words_and_separators(signals, norm):
        return "multi-word entry split"
    return "not in the list"


def _words_and_separators(signals: RoutingSignals, norm: str) -> bool:
    """Whether `norm` is a run of continuation entries and separators, an entry with a space in it
    ("go ahead") counting as one: what the module's docstring promises to accept."""
    reachable = [True] + [False] * len(norm)
    for i in range(len(norm)):
        if not reachable[i]:
            continue
        if _SEPARATORS.fullmatch(norm[i]):
            reachable[i + 1] = True
        for word in signals.continuation:
            if norm.startswith(word, i):
                reachable[i + len(word)] = True
    return reachable[-1]


@dataclass(frozen=True)
class Outcome:
    turn: Turn
    text: str
    clicked: bool
    active: bool
    why: str  # 'hit' or the reason of a miss

    @property
    def taken(self) -> bool:  # the fast path is taken
        return self.active and self.why == "hit"


def simulate(dialogues: list[list[Turn]], signals: RoutingSignals, clicks: bool) -> list[Outcome]:
    """Every turn but a conversation's first has an active agent: some agent reasoned in the turn before."""
    quick = set(signals.quick_actions())
    out = []
    for turns in dialogues:
        for turn in turns:
            clicked = clicks and turn.chip is not None and turn.chip in quick
            message = turn.chip if clicked else turn.user
            out.append(Outcome(turn, message, clicked, turn.index > 0, why_not(signals, message)))
    return out


def rate(part: int, whole: int) -> str:
    return f"{part}/{whole} = {100 * part / whole:.1f}%" if whole else "-"


# -- replay of the dialogue set on the real server ----------------------------------------------


@dataclass
class Replay:
    turns: int = 0
    fast: int = 0
    predicted_fast: int = 0
    mismatches: list[str] = field(default_factory=list)
    seconds: float = 0.0


def replay(server: ServerProcess, llm: ScriptedLLMServer, model: DelayedModel, outcomes: list[Outcome]) -> Replay:
    """Send every turn to the server as the user would, one conversation per dialogue, each turn once
    the previous one ended; the intent stage answers the turn's labelled agent."""
    result, started, cid = Replay(), time.monotonic(), None
    for o in outcomes:
        model.top_up()
        model.intent_agent = o.turn.agent
        sent = server.send(o.text, None if o.turn.index == 0 else cid)
        cid = sent["conversation_id"]
        predicted = FAST if o.taken else PIPELINE
        result.turns += 1
        result.fast += sent["route"] == FAST
        result.predicted_fast += predicted == FAST
        if sent["route"] != predicted:
            result.mismatches.append(f"{o.turn.dialogue} turn {o.turn.index + 1} {o.text!r}: server {sent['route']}, "
                                     f"predicted {predicted}")
        task = poll_task(server, sent["task_id"], until_suggestions=False)
        if task["status"] != "succeeded":
            raise BenchError(f"replay {o.turn.dialogue} turn {o.turn.index + 1}: task {task['status']}")
    result.seconds = time.monotonic() - started
    return result


def chip_probe(dialogues: list[list[Turn]], signals: RoutingSignals) -> list[Outcome]:
    """One conversation: the opener, then every distinct chip word of the set, clicked in turn."""
    words = list(dict.fromkeys(t.chip for d in dialogues for t in d if t.chip in signals.quick_actions()))
    turns = [Turn("chip-probe", "zh", 0, OPENER, "new", "InfoAgent", False, None, None)]
    turns += [Turn("chip-probe", "zh", i, w, "ack", "InfoAgent", True, w, None) for i, w in enumerate(words, 1)]
    return simulate([turns], signals, clicks=True)


# -- output ------------------------------------------------------------------------------------


def _width(s: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in s)


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], right: Sequence[bool] | None = None) -> None:
    cells = [[str(c) for c in row] for row in rows]
    widths = [max([_width(h)] + [_width(r[i]) for r in cells]) for i, h in enumerate(headers)]
    right = right or [i > 0 for i in range(len(headers))]

    def line(values: Sequence[str]) -> str:
        padded = [(" " * (w - _width(v)) + v) if r else (v + " " * (w - _width(v)))
                  for v, w, r in zip(values, widths, right, strict=True)]
        return " | ".join(padded).rstrip()

    print(line(headers))
    print("-+-".join("-" * w for w in widths))
    for row in cells:
        print(line(row))


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def p90(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))] if ordered else float("nan")


def report_part1(p: Part1, delay_ms: float) -> dict[str, float]:
    print(f"\nPart 1: one continuation message, fast path vs full pipeline "
          f"(every model request answers {delay_ms:g} ms after receipt)\n")
    rows = []
    for f, q in zip(p.fast, p.pipeline, strict=True):
        rows.append([f.message, f.requests, f"{f.done_ms:.0f}", q.requests, f"{q.done_ms:.0f}",
                     f"x{q.done_ms / f.done_ms:.2f}"])
    print_table(["message", "fast: requests", "fast: reply ms", "pipeline: requests", "pipeline: reply ms",
                 "pipeline / fast"], rows)
    print()
    summary = []
    for name, samples in (("fast path", p.fast), ("full pipeline", p.pipeline)):
        kinds = Counter(k for s in samples for k in s.kinds)
        per = ", ".join(f"{kinds[k] / len(samples):g} {k}" for k in ("rewrite", "intent", "agent") if kinds[k])
        gaps = [s.suggest_gap_ms for s in samples if s.suggest_gap_ms is not None]
        overhead = [s.done_ms - s.requests * delay_ms for s in samples]
        ms = [median([getattr(s, f) for s in samples]) for f in ("ack_ms", "agent_call_ms", "first_ms", "done_ms")]
        summary.append([name, len(samples), f"{statistics.mean(s.requests for s in samples):g} ({per})",
                        f"{statistics.mean(s.suggest_calls for s in samples):g}, +{median(gaps):.0f} ms",
                        *(f"{v:.0f}" for v in ms), f"{p90([s.done_ms for s in samples]):.0f}",
                        f"{median(overhead):.0f}"])
    print_table(["route", "messages", "model requests per message (until the reply)",
                 "suggestion calls after the reply", "ack ms", "agent call ms", "first token ms", "reply done ms",
                 "p90 ms", "overhead ms"], summary)
    fast_req = statistics.mean(s.requests for s in p.fast)
    pipe_req = statistics.mean(s.requests for s in p.pipeline)
    fast_ms, pipe_ms = median([s.done_ms for s in p.fast]), median([s.done_ms for s in p.pipeline])
    print(f"\npipeline / fast path: model requests x{pipe_req / fast_req:.2f} ({pipe_req:g} vs {fast_req:g}; "
          f"{pipe_req + 1:g} vs {fast_req + 1:g} with the suggestion call), reply done x{pipe_ms / fast_ms:.2f} "
          f"(median {pipe_ms:.0f} vs {fast_ms:.0f} ms, {pipe_ms - fast_ms:.0f} ms saved per message), "
          f"ack {median([s.ack_ms for s in p.pipeline]):.0f} vs {median([s.ack_ms for s in p.fast]):.0f} ms")
    print("(ms from the POST, medians; ack = its 202: the pipeline's rewrite and intent calls run inside it; "
          "agent call = the agent's model request received; overhead = reply done - requests x delay: the server's "
          "own time; suggestion calls: +ms from the reply's text_end to the call)")
    print("\nsuggestion chips clicked on the real server (the chips the product offered after the last reply):")
    print_table(["chip", "text", "route", "model requests", "reply done ms"],
                [[label, s.message, s.route, s.requests, f"{s.done_ms:.0f}"] for label, s in p.clicks])
    return {"fast_req": fast_req, "pipe_req": pipe_req, "fast_ms": fast_ms, "pipe_ms": pipe_ms}


def report_part2(source: Path, dialogues: list[list[Turn]], signals: RoutingSignals, typed: list[Outcome],
                 clicked: list[Outcome], costs: dict[str, float] | None) -> None:
    turns = [t for d in dialogues for t in d]
    langs = Counter(t.lang for t in turns)
    cont = [t for t in turns if t.cont]
    switches = [t for t in turns if t.index > 0 and not t.cont]
    chips = [t for t in cont if t.chip]
    offered = [t for t in chips if t.chip in signals.quick_actions()]
    print(f"\nPart 2: fast-path hit rate over {source.name}: {len(dialogues)} dialogues, "
          f"{len(turns)} user turns ({', '.join(f'{n} {lang}' for lang, n in sorted(langs.items()))}); "
          f"{len(turns) - len(dialogues)} with an active agent: {len(cont)} intended continuations, "
          f"{len(switches)} topic switches; a fitting quick-action chip on {len(offered)} of the continuations"
          + (f" ({len(chips) - len(offered)} chip words are not in this word list)" if len(offered) < len(chips)
             else "") + "\n")

    def hits(outcomes: list[Outcome], pick: Callable[[Turn], bool]) -> tuple[int, int]:
        chosen = [o for o in outcomes if pick(o.turn) and o.active]
        return sum(o.taken for o in chosen), len(chosen)

    rows = []
    for name, outcomes in (("typed", typed), ("with suggestion clicks", clicked)):
        h, n = hits(outcomes, lambda t: t.cont)
        fh, fn = hits(outcomes, lambda t: not t.cont)
        zh, zn = hits(outcomes, lambda t: t.cont and t.lang == "zh")
        eh, en = hits(outcomes, lambda t: t.cont and t.lang == "en")
        rows.append([name, rate(h, n), rate(zh, zn), rate(eh, en), rate(fh, fn),
                     sum(o.clicked for o in outcomes)])
    print_table(["user input", "hit rate", "hit rate zh", "hit rate en", "false hits (on switches)", "clicks"], rows)
    print("(with clicks: every fitting chip offered and clicked, an upper bound; if a share c of them is clicked, "
          "the hit rate is typed + c x the difference)")

    print("\nby kind of turn (intended continuations; switches for the false hits):")
    rows = []
    for kind in KINDS[1:]:
        ts = [t for t in turns if t.kind == kind and t.index > 0]
        if not ts:
            continue
        th, tn = hits(typed, lambda t, k=kind: t.kind == k)
        ch, _ = hits(clicked, lambda t, k=kind: t.kind == k)
        rows.append([kind, tn, sum(1 for t in ts if t.chip in signals.quick_actions()), rate(th, tn), rate(ch, tn)])
    print_table(["kind", "turns", "with a chip", "fast path typed", "fast path with clicks"], rows)

    print("\nwhy intended continuations missed the fast path:")
    reasons = sorted({o.why for o in typed + clicked if o.turn.cont and o.active and not o.taken})
    rows = [[r, sum(1 for o in typed if o.turn.cont and o.active and o.why == r),
             sum(1 for o in clicked if o.turn.cont and o.active and o.why == r)] for r in reasons]
    print_table(["reason", "typed", "with clicks"], rows)

    quick_missed = [o for o in typed if o.turn.cont and o.active and not o.taken and o.turn.chip]
    print(f"\ntyped quick-action intents that missed ({len(quick_missed)}; a chip click turns each into a hit):")
    for why in sorted({o.why for o in quick_missed}):
        texts = list(dict.fromkeys(o.text for o in quick_missed if o.why == why))
        print(f"  {why}: " + " ".join(json.dumps(t, ensure_ascii=False) for t in texts))
    vetoed = [o for o in typed if o.turn.cont and o.active and o.why == "topic-switch veto"]
    if vetoed:
        print("typed continuations vetoed by the topic-switch list: "
              + " ".join(json.dumps(o.text, ensure_ascii=False) for o in vetoed))
    for name, outcomes in (("typed", typed), ("with clicks", clicked)):
        false_hits = [o for o in outcomes if o.taken and not o.turn.cont]
        print(f"false hits {name} ({len(false_hits)}): " + ("; ".join(
            f"{o.text!r} in {o.turn.dialogue} ({o.turn.note or 'topic switch'})" for o in false_hits) or "none"))

    if costs:
        print("\nexpected cost of an intended continuation (hit rate x fast path + misses x pipeline, "
              "Part 1 medians; the suggestion call comes on top in every case):")
        rows = []
        for name, outcomes in (("no fast path", None), ("typed", typed), ("with suggestion clicks", clicked)):
            h, n = hits(outcomes, lambda t: t.cont) if outcomes is not None else (0, 1)
            share = h / n
            reqs = share * costs["fast_req"] + (1 - share) * costs["pipe_req"]
            ms = share * costs["fast_ms"] + (1 - share) * costs["pipe_ms"]
            rows.append([name, f"{100 * share:.1f}%", f"{reqs:.2f}", f"{ms:.0f}"])
        print_table(["user input", "fast path", "model requests", "reply done ms"], rows)


# -- main ----------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--delay-ms", type=float, default=200.0,
                   help="the scripted model's delay before it answers any request (default 200)")
    p.add_argument("--messages", type=int, default=len(CONTINUATIONS),
                   help=f"continuation messages per route in part 1 (default {len(CONTINUATIONS)}, each word once)")
    p.add_argument("--dialogues", type=Path, default=DIALOGUES, help="the dialogue set (default bench/dialogues.json)")
    p.add_argument("--signals", type=Path, default=None,
                   help="routing-signals TOML to evaluate (default ROUTING_SIGNALS or the product's list)")
    p.add_argument("--no-replay", action="store_true", help="skip the replay of the dialogue set on the server")
    p.add_argument("--quick", action="store_true", help="smoke run: 4 messages, replay of 6 dialogues")
    p.add_argument("--keep", action="store_true", help="keep the temp dir (server log, database)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signals_path = args.signals or (Path(os.environ["ROUTING_SIGNALS"]) if os.environ.get("ROUTING_SIGNALS") else None)
    signals = load_routing_signals(signals_path)
    dialogues = load_dialogues(args.dialogues)
    n_messages = 4 if args.quick else args.messages
    messages = [CONTINUATIONS[i % len(CONTINUATIONS)] for i in range(n_messages)]
    delay_ms = args.delay_ms

    tmp = Path(tempfile.mkdtemp(prefix="bench-fast-path-"))
    llm = ScriptedLLMServer().start()
    server: ServerProcess | None = None
    started = time.monotonic()
    load_before = os.getloadavg()[0]
    try:
        env = {"ROUTING_SIGNALS": str(signals_path.resolve())} if signals_path else {}
        server = ServerProcess(tmp, llm.base_url, env=env).start()
        model = DelayedModel(llm, delay_ms / 1000)
        model.install()
        print(f"bench/fast_path: run.py (eventlet, SQLite in {tmp}) against the scripted model; word list "
              f"{signals_path or 'modules/multi_agent/default_routing_signals.toml'}; "
              f"{os.cpu_count()} CPUs, load average {load_before:.2f} at start", flush=True)

        part1 = run_part1(server, llm, model, signals, messages)
        costs = report_part1(part1, delay_ms)

        typed = simulate(dialogues, signals, clicks=False)
        clicked = simulate(dialogues, signals, clicks=True)
        report_part2(args.dialogues, dialogues, signals, typed, clicked, costs)

        if not args.no_replay:
            model.delay_s = 0.0
            first_six = {d[0].dialogue for d in dialogues[:6]}
            runs = [("typed, 6 dialogues", [o for o in typed if o.turn.dialogue in first_six]) if args.quick
                    else ("typed, every dialogue", typed),
                    ("each distinct chip word clicked", chip_probe(dialogues, signals))]
            print("\nreplay on the real server (model delay 0): the route POST /api/tasks returned vs the prediction")
            rows, bad = [], []
            for name, outcomes in runs:
                r = replay(server, llm, model, outcomes)
                rows.append([name, r.turns, r.fast, r.predicted_fast, len(r.mismatches), f"{r.seconds:.0f}"])
                bad += r.mismatches
            print_table(["input", "turns sent", "fast_path (server)", "fast_path (predicted)", "mismatches",
                         "seconds"], rows)
            for line in bad:
                print(f"  MISMATCH {line}")
            if bad:
                raise BenchError(f"{len(bad)} routes differ from the prediction")
        load_after = os.getloadavg()[0]
        print(f"\ntotal {time.monotonic() - started:.0f} s; load average {load_before:.2f} at start, "
              f"{load_after:.2f} at the end")
        cpus = os.cpu_count() or 1
        if load_before > 0.5 * cpus or load_after > 0.75 * cpus:
            print("warning: the machine was busy with other work; the latencies (not the counts) are inflated")
        return 0
    except BenchError as exc:
        print(f"\nbenchmark failed: {exc}", file=sys.stderr)
        return 1
    finally:
        if server is not None:
            server.stop()
        llm.stop()
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

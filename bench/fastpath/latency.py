"""Part 1 of bench/fast_path.py: one continuation by the fast path, by one combined routing request, and by
the seed's full pipeline (rewriting, then intent recognition), in the same run; and the acknowledgement.

Two servers share the streaming model: `combined` (the default routing) and `separate`
(`ROUTING_STAGES=separate`). Conversation A on the first keeps its active agent (fast
path); conversation B on the first and C on the second have their active agent deleted
before each message, so the same text takes the routing stages. Times are from the POST:
`ack` its 202, `first token` and `reply done` the task's first `text_chunk` and last
`text_end` (their server-side `ts`).
"""

from __future__ import annotations

import sqlite3
import statistics
import time
from dataclasses import dataclass

from bench.fastpath.model import StreamingModel, request_kind
from bench.fastpath.replay import BenchError
from modules.event_catalogue import TextChunkEvent, TextEndEvent
from modules.statuses import TaskStatus
from test.conftest import FINAL_STATUSES, ServerProcess
from test.scripted_llm import ScriptedLLMServer

OPENER = "帮我查一下杭州的差旅政策"
REPLY = "杭州属二类城市：住宿每晚不超过 500 元，伙食补助每天 100 元，市内交通实报实销。需要我按这个标准帮你核对行程吗？"
CONTINUATIONS = ["确认", "继续", "好的", "ok", "好的，继续", "没问题", "yes", "可以", "嗯嗯", "confirm", "行",
                 "go ahead", "是的", "continue", "对", "同意"]
MODES = ("fast path", "one routing request", "full pipeline (rewrite, intent)")


@dataclass
class Sample:
    mode: str
    ack_ms: float
    first_ms: float
    done_ms: float
    kinds: list[str]


def poll_task(server: ServerProcess, task_id: str, timeout: float = 30) -> dict:
    deadline, events, offset = time.monotonic() + timeout, [], 0
    while time.monotonic() < deadline:
        body = server.get(f"/api/tasks/{task_id}?from={offset}").json()
        events.extend(body["events"])
        offset = body["next_offset"]
        if body["status"] in FINAL_STATUSES:
            return {**body, "events": events}
        time.sleep(0.01)
    raise BenchError(f"task {task_id} not final within {timeout:g} s")


def measure(server: ServerProcess, llm: ScriptedLLMServer, model: StreamingModel, cid: str | None, message: str,
            mode: str) -> tuple[Sample, str]:
    model.top_up()
    before = len(llm.requests)
    t0 = time.time()
    res = server.post("/api/tasks", {"message": message, **({"conversation_id": cid} if cid else {})})
    ack = time.time()
    if res.status_code != 202:
        raise BenchError(f"{mode} {message!r}: {res.status_code} {res.text}")
    sent = server.routed(res.json())
    task = poll_task(server, sent["task_id"])
    chunks = [e["ts"] for e in task["events"] if e["type"] == TextChunkEvent.TYPE]
    ends = [e["ts"] for e in task["events"] if e["type"] == TextEndEvent.TYPE]
    if task["status"] != TaskStatus.SUCCEEDED or not chunks or not ends:
        raise BenchError(f"{mode} {message!r}: task {task['status']} without a reply")
    kinds = [request_kind(r.body) for r in llm.requests[before:] if request_kind(r.body) != "suggest"
             and r.received_wall <= ends[-1]]
    return Sample(mode, (ack - t0) * 1000, (chunks[0] - t0) * 1000, (ends[-1] - t0) * 1000, kinds), \
        sent["conversation_id"]


def clear_active_agent(server: ServerProcess, conversation_id: str) -> None:
    with sqlite3.connect(server.data_dir / "app.db", timeout=10) as db:
        db.execute("DELETE FROM session_store WHERE key = ? AND field = 'activeAgent'", (f"{conversation_id}:router",))


def run_part1(combined: ServerProcess, separate: ServerProcess, llm: ScriptedLLMServer, model: StreamingModel,
              messages: list[str]) -> dict[str, list[Sample]]:
    model.agent, model.reply, model.chips = "InfoAgent", REPLY, []
    cids = {}
    for mode, server in zip(MODES, (combined, combined, separate), strict=True):
        _, cids[mode] = measure(server, llm, model, None, OPENER, "setup")
    samples: dict[str, list[Sample]] = {m: [] for m in MODES}
    expected = {MODES[0]: ["agent"], MODES[1]: ["route", "agent"], MODES[2]: ["rewrite", "intent", "agent"]}
    for i, message in enumerate(messages):
        order = MODES if i % 2 == 0 else tuple(reversed(MODES))
        for mode in order:
            server = separate if mode == MODES[2] else combined
            if mode != MODES[0]:
                clear_active_agent(server, cids[mode])
            sample, _ = measure(server, llm, model, cids[mode], message, mode)
            if sample.kinds != expected[mode]:
                raise BenchError(f"{mode} {message!r}: requests {sample.kinds}, expected {expected[mode]}")
            samples[mode].append(sample)
    return samples


def run_ack(server: ServerProcess, llm: ScriptedLLMServer, model: StreamingModel, n: int,
            conversation_id: str | None) -> list[float]:
    """POST /api/tasks n times (to new conversations, or to one), each taking the routing request, while
    the model answers every request after model.ttft_s: the milliseconds until each 202."""
    acks, tasks = [], []
    for i in range(n):
        model.top_up()
        t0 = time.perf_counter()
        res = server.post("/api/tasks", {"message": f"{OPENER}（{i}）",
                                         **({"conversation_id": conversation_id} if conversation_id else {})})
        acks.append((time.perf_counter() - t0) * 1000)
        if res.status_code != 202:
            raise BenchError(f"ack: {res.status_code} {res.text}")
        tasks.append(res.json())
    for answer in tasks:
        poll_task(server, server.routed(answer, timeout=60)["task_id"], timeout=60)
    return acks


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")

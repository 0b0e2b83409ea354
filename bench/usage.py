"""Benchmark: what the usage ledger adds to one model request (README, "Measured costs").

A turn's round is a model request followed by its `text_end` event, written through the process's group
commit. This runs that round N times each way, interleaved so both see the same machine: with the bare
model, and with the metered one (modules/usage/metered_model.py: the context, the estimate or the reported
usage, the price, the deferred row, the task's sums, the metrics listener). The model answers at once (its
own time is not what is measured). Prints the median and p90 of each, the median added time (goal: under
1 ms), and the transactions per round of each (goal: none added: the ledger's row rides the event's batch).
A third series has the provider report no usage, so the token estimate runs.

Run: `.venv/bin/python bench/usage.py [--runs N] [--database-url URL]` (a few seconds on SQLite).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from modules.event_catalogue import TextEndEvent
from modules.llm import ModelReply, ToolCall, Usage  # noqa: E402
from modules.storage import conversations  # noqa: E402
from modules.storage import tasks as task_store  # noqa: E402
from modules.storage.db import Database  # noqa: E402
from modules.storage.group_commit import GroupCommit  # noqa: E402
from modules.storage.models import ModelUsage, TaskEvent  # noqa: E402
from modules.storage.users import get_or_create_user  # noqa: E402
from modules.usage.ledger import UsageLedger  # noqa: E402
from modules.usage.metered_model import MeteredChatModel  # noqa: E402
from modules.usage.prices import Price, PriceTable  # noqa: E402
from modules.usage.records import AGENT, CallContext  # noqa: E402
from server.metrics import Metrics  # noqa: E402

GOAL_MS = 1.0
# A history of a few turns, as an agent's request carries it (the estimate reads all of it).
MESSAGES = [{"role": "system", "content": "You are MasterAgent, the lead of a team. " * 20}] + [
    {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}: " + "some words of the dialogue " * 12}
    for i in range(12)]


class InstantModel:
    label = "bench"

    def __init__(self, usage: Usage | None):
        self.usage = usage

    def stream_chat(self, *, messages, tools=None, model=None, on_text, should_stop, on_reasoning, on_failed_attempt):
        on_text("The answer.")
        return ModelReply("The answer.", [ToolCall("c1", "run_command", '{"command": "ls"}')], "tool_calls",
                          usage=self.usage, model="bench-model", latency_s=0.001, first_token_s=0.0005)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(args.database_url or f"sqlite:///{Path(tmp) / 'bench.db'}")
        db.migrate()
        conv, master = conversations.create_conversation(db, get_or_create_user(db, "bench").id, "bench")
        with db.write() as s:
            task = task_store.create_task_in(s, conversation_id=conv.id, agent_id=master.id, task_type="chat",
                                             owner="bench")
        writer = GroupCommit(db)
        ledger = UsageLedger(db, writer, listeners=(Metrics().model_request,))
        prices = PriceTable({"bench-model": Price(2.0, 0.5, 8.0)})
        reported = Usage(1200, 80, 600, 10)
        bare = InstantModel(reported)
        metered = MeteredChatModel(InstantModel(reported), ledger, prices, "bench-model").bound(
            CallContext(AGENT, conv.id, agent="MasterAgent", agent_id=master.id, task_id=task.id))
        estimated = MeteredChatModel(InstantModel(None), ledger, prices, "bench-model").bound(
            CallContext(AGENT, conv.id, agent="MasterAgent", agent_id=master.id, task_id=task.id))
        idx = [0]

        def round_trip(model) -> tuple[float, int]:
            before = writer.batches
            started = time.perf_counter()
            model.stream_chat(messages=MESSAGES, tools=None, model=None, on_text=lambda _t: None,
                              should_stop=lambda: False, on_reasoning=lambda _t: None)
            writer.insert(TaskEvent.__table__, [dict(task_id=task.id, idx=idx[0], type=TextEndEvent.TYPE, data={},
                                                     ts=0.0)])
            idx[0] += 1
            return (time.perf_counter() - started) * 1000, writer.batches - before

        series: dict[str, list[tuple[float, int]]] = {"bare": [], "metered": [], "estimated": []}
        for _ in range(args.runs):
            series["bare"].append(round_trip(bare))
            series["metered"].append(round_trip(metered))
            series["estimated"].append(round_trip(estimated))
        ledger.flush()
        with db.read() as s:
            rows = s.query(ModelUsage).count()
        db.dispose()
    print(f"{args.runs} rounds each on {(args.database_url or 'sqlite').split(':')[0]}; {rows} ledger rows written")
    medians = {}
    for name, values in series.items():
        times = sorted(t for t, _ in values)
        commits = sum(c for _, c in values) / len(values)
        medians[name] = statistics.median(times)
        print(f"  {name:9s} median {medians[name]:.3f} ms  p90 {times[int(len(times) * 0.9)]:.3f} ms  "
              f"transactions per round {commits:.3f}")
    for name in ("metered", "estimated"):
        added = medians[name] - medians["bare"]
        print(f"  added by the ledger ({name}): {added * 1000:.0f} us median (goal < {GOAL_MS:g} ms): "
              f"{'met' if added < GOAL_MS else 'MISSED'}")
    extra = sum(c for _, c in series["metered"]) - sum(c for _, c in series["bare"])
    print(f"  extra transactions over {args.runs} metered rounds: {extra}")
    return 0 if rows == 2 * args.runs else 1


if __name__ == "__main__":
    sys.exit(main())

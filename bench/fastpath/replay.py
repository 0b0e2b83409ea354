"""Replaying a labelled set through a real server, compared with the product's predicted routes.

One conversation per dialogue, each turn sent once the previous turn's reply is done;
the routing stage names the turn's labelled agent and the agent answers with the
turn's labelled reply, so the server sees what the simulation assumed. The route the
server chose is compared with the prediction, its target with the label, and the model
requests before the agent (routing stages) are counted.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from bench.fastpath.dialogue_set import Outcome
from bench.fastpath.model import STAGES, StreamingModel, request_kind
from modules.statuses import TaskStatus
from test.conftest import ServerProcess
from test.scripted_llm import ScriptedLLMServer

FAST = "fast_path"


class BenchError(RuntimeError):
    """The product did not behave as the measurement assumes (wrong route, failed task, timeout)."""


@dataclass
class Replay:
    turns: int = 0
    fast: int = 0
    predicted_fast: int = 0
    misroutes: int = 0  # fast path to an agent other than the labelled one
    stage_requests: int = 0
    mismatches: list[str] = field(default_factory=list)
    seconds: float = 0.0


def role_of(display_name: str | None) -> str:
    return (display_name or "").rsplit("_", 1)[0] if display_name and "_" in display_name else display_name or ""


def replay(server: ServerProcess, llm: ScriptedLLMServer, model: StreamingModel, outcomes: list[Outcome]) -> Replay:
    result, started, cid = Replay(), time.monotonic(), None
    for o in outcomes:
        model.top_up()
        model.agent, model.reply, model.chips = o.turn.agent, o.turn.reply or "好的。", []
        before = len(llm.requests)
        sent = server.send(o.text, None if o.turn.index == 0 else cid)
        cid = sent["conversation_id"]
        task = server.wait_task(sent["task_id"], timeout=30)
        if task["status"] != TaskStatus.SUCCEEDED:
            raise BenchError(f"replay {o.turn.dialogue} turn {o.turn.index + 1}: task {task['status']}")
        result.turns += 1
        fast = sent["route"] == FAST
        result.fast += fast
        result.predicted_fast += o.fast
        result.misroutes += fast and role_of(sent["target_agent"]) != o.turn.agent
        result.stage_requests += sum(1 for r in llm.requests[before:] if request_kind(r.body) in STAGES)
        if fast != o.fast:
            result.mismatches.append(f"{o.turn.dialogue} turn {o.turn.index + 1} {o.text!r}: server {sent['route']}, "
                                     f"predicted {'fast_path' if o.fast else 'pipeline'} ({o.reason})")
    result.seconds = time.monotonic() - started
    return result

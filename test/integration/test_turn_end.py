"""How a turn ends: the end-of-turn check starts the follow-up itself (not the membership sweep, seconds
later), and the tool-iteration limit ends a turn with `iteration_limit`, leaving what came during its last
round queued for the follow-up (README: MAX_TOOL_ITERATIONS; docs/API.md: POST /api/tasks)."""

from __future__ import annotations

import json
import threading

from modules.event_catalogue import ErrorEvent, ToolResultEvent, UserMessageEvent
from modules.statuses import Delivery, TaskStatus
from test.conftest import NO_SWEEP_LAUNCHER, event_types
from test.scripted_llm import text, tool_calls

# The follow-up comes within milliseconds; without the end-of-turn check it would never come here (the sweep
# that would rescue it is off), so this bound only has to outlast a busy machine.
FOLLOW_UP_S = 15


def _tasks(server, cid):
    return server.get(f"/api/tasks?conversation_id={cid}").json()["data"]


def test_a_message_during_the_last_output_is_followed_up_by_the_end_of_turn_check(make_server, llm):
    server = make_server(launcher=NO_SWEEP_LAUNCHER)
    gate = threading.Event()
    llm.script(text("slow answer", wait=gate))
    llm.script(text("answer to the second"))
    sent = server.send("first")
    llm.wait_for_requests(1)
    second = server.send("second", sent["conversation_id"])
    assert second["delivery"] == Delivery.INJECTED_INLINE and second["task_id"] == sent["task_id"]
    status = server.get(f"/api/conversations/{sent['conversation_id']}/running-status").json()
    assert status["is_main_running"] is True and status["main_task_id"] == sent["task_id"]
    gate.set()
    assert server.wait_task(sent["task_id"])["status"] == TaskStatus.SUCCEEDED
    reqs = llm.wait_for_requests(2, timeout=FOLLOW_UP_S)
    assert reqs[1].body["messages"][-1] == {"role": "user", "content": "second"}
    follow = [t for t in _tasks(server, sent["conversation_id"]) if t["task_id"] != sent["task_id"]]
    assert len(follow) == 1
    follow_up = server.wait_task(follow[0]["task_id"])
    assert follow_up["status"] == TaskStatus.SUCCEEDED and follow_up["events"][0]["data"]["message"] == "second"
    assert len(llm.agent_requests) == 2


def test_the_tool_iteration_limit_fails_the_turn_and_its_last_round_leaves_the_queue_alone(make_server, llm):
    server = make_server(env={"MAX_TOOL_ITERATIONS": "3"}, launcher=NO_SWEEP_LAUNCHER)
    last_round = threading.Event()
    loop = tool_calls(("run_command", {"command": "echo again"}))
    llm.script(loop, loop, tool_calls(("run_command", {"command": "echo last"}), wait=last_round))
    llm.script(text("Now to your late message."))
    sent = server.send("loop forever")
    cid = sent["conversation_id"]
    llm.wait_for_requests(3)
    late = server.send("a late message", cid)
    assert late["delivery"] == Delivery.INJECTED_INLINE and late["task_id"] == sent["task_id"]
    last_round.set()

    task = server.wait_task(sent["task_id"])
    assert task["status"] == TaskStatus.FAILED and task["error"]["code"] == "iteration_limit"
    assert event_types(task)[-1] == ErrorEvent.TYPE
    assert task["events"][-1]["data"]["message"] == "stopped after 3 model calls without a final answer"
    results = [json.loads(e["data"]["result"]) for e in task["events"] if e["type"] == ToolResultEvent.TYPE]
    assert [r["output"].strip() for r in results] == ["again", "again", "last"]
    # No model call follows the last round, so its inline batch must not take the late message...
    assert [e["data"]["message"] for e in task["events"] if e["type"] == UserMessageEvent.TYPE] == ["loop forever"]

    # ...which starts the follow-up instead, with a valid history: every call closed, then the message.
    reqs = llm.wait_for_requests(4, timeout=FOLLOW_UP_S)
    follow_up = reqs[3].body["messages"]
    assert [m["role"] for m in follow_up[-3:]] == ["assistant", "tool", "user"]
    assert follow_up[-1]["content"] == "a late message"
    follow = [t for t in _tasks(server, cid) if t["task_id"] != sent["task_id"]]
    assert len(follow) == 1 and server.wait_task(follow[0]["task_id"])["status"] == TaskStatus.SUCCEEDED
    assert len(llm.agent_requests) == 4

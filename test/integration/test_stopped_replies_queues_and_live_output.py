"""Server-side fixes of the UI's defects (issue 11): a stopped reply is marked in the stored history,
queued user messages can be listed after a reload, and an agent's queue size is sent live."""

from __future__ import annotations

import json
import threading

from modules.event_catalogue import PendingCountEvent, TextChunkEvent, TextEndEvent, ToolOutputEvent
from modules.statuses import Delivery, TaskStatus
from test.conftest import wait_until
from test.integration.event_recorder import Recorder, conforms
from test.scripted_llm import text, tool_calls


def test_a_stopped_reply_is_marked_stopped_in_the_event_and_the_history(server, llm):
    full = "word " * 200
    llm.script(text(full, chunk_size=5, delay_s=0.05))
    sent = server.send("tell me a long story")
    server.wait_event(sent["task_id"], TextChunkEvent.TYPE)
    assert server.post(f"/api/tasks/{sent['task_id']}/cancel").status_code == 200
    task = server.wait_task(sent["task_id"])
    assert task["status"] == TaskStatus.STOPPED
    end = next(e["data"] for e in task["events"] if e["type"] == TextEndEvent.TYPE)
    assert end["stopped"] is True and end["partial"] is True and 0 < len(end["content"]) < len(full)
    problems = [p for e in task["events"] if (p := conforms(e["type"], e["data"]))]
    assert not problems, problems
    history = server.get(f"/api/conversations/{sent['conversation_id']}/messages").json()["data"]
    reply = [m for m in history if m["role"] == "assistant"][-1]
    assert reply["content"] == end["content"]
    assert reply["metadata"]["stopped"] is True and reply["metadata"]["partial"] is True

    llm.script(text("A short and complete answer."))
    again = server.send("a short one then", sent["conversation_id"])
    done = server.wait_task(again["task_id"])
    end = next(e["data"] for e in done["events"] if e["type"] == TextEndEvent.TYPE)
    assert "stopped" not in end and "partial" not in end
    history = server.get(f"/api/conversations/{sent['conversation_id']}/messages").json()["data"]
    assert "stopped" not in [m for m in history if m["role"] == "assistant"][-1]["metadata"]


def test_queued_messages_are_listed_and_the_queue_size_is_sent_live(auth_server, llm):
    server = auth_server
    cid = server.post("/api/conversations", {"title": "queue"}).json()["conversation_id"]
    recorder = Recorder(server.url, token="tok-alice")
    release = threading.Event()
    try:
        recorder.join(cid)
        llm.script(text("A slow first answer.", wait=release))
        llm.script(text("Both read."))
        first = server.send("first", cid)
        llm.wait_for_requests(1)
        second = server.send("second", cid)
        third = server.send("third", cid)
        assert second["delivery"] == third["delivery"] == Delivery.INJECTED_INLINE

        queued = server.get(f"/api/conversations/{cid}/queued").json()["data"]
        assert [(m["message_id"], m["content"], m["status"], m["target_agent"]) for m in queued] == [
            (second["message_id"], "second", "queued", "MasterAgent"),
            (third["message_id"], "third", "queued", "MasterAgent")]
        assert queued[0]["created_at"].endswith("Z")
        assert server.get(f"/api/conversations/{cid}/queued", token="tok-bob").status_code == 404

        def counts() -> list[int]:
            return [d["pending_count"] for e, d in recorder.seen() if e == PendingCountEvent.TYPE]

        wait_until(lambda: counts()[-2:] == [1, 2], 10, what="the live queue sizes 1 and 2")
        release.set()
        assert server.wait_task(first["task_id"])["status"] == TaskStatus.SUCCEEDED
        wait_until(lambda: counts()[-1:] == [0], 15, what="the live queue size 0 once a turn read them")
        wait_until(lambda: server.get(f"/api/conversations/{cid}/queued").json()["data"] == [], 15,
                   what="the queue to be empty")
        problems = [p for e, d in recorder.seen() if (p := conforms(e, d))]
        assert not problems, problems
        master = server.get(f"/api/conversations/{cid}/agents").json()["data"][0]
        assert all(d["agent_id"] == master["agent_id"] for e, d in recorder.seen() if e == PendingCountEvent.TYPE)
    finally:
        release.set()
        recorder.client.disconnect()


def test_a_foreground_commands_output_streams_and_survives_a_restart_that_kills_it(make_server, llm):
    server = make_server()
    llm.script(tool_calls(("run_command", {"command": "echo partial-7731; sleep 60"})))
    sent = server.send("run the long one")
    live = server.wait_event(sent["task_id"], ToolOutputEvent.TYPE)
    assert "partial-7731" in live["text"] and live["truncated"] is False and not conforms(ToolOutputEvent.TYPE, live)
    server.kill()
    server.start()
    task = server.wait_task(sent["task_id"])
    assert task["status"] == TaskStatus.FAILED
    history = server.get(f"/api/conversations/{sent['conversation_id']}/messages").json()["data"]
    closed = json.loads(next(m["content"] for m in history if m["role"] == "tool"))
    assert closed["success"] is False and "restarted" in closed["error"]
    assert "partial-7731" in closed["output"]

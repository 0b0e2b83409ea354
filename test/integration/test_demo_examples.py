"""The offline demo model's example phrases, each through the real server with no API key, and every
event the server sends meanwhile checked against the event catalogue (modules/event_catalogue.py)."""

from __future__ import annotations

import pytest

from modules.event_catalogue import (
    AgentStateEvent,
    AiMessageStartEvent,
    AskUserEvent,
    RouteEvent,
    SuggestionsEvent,
    TaskCompleteEvent,
    TextChunkEvent,
    TextEndEvent,
    ToolResultEvent,
    ToolStartEvent,
    UserMessageEvent,
)
from modules.llm.demo_model import (
    EXAMPLE_ASK_USER,
    EXAMPLE_BACKGROUND_COMMAND,
    EXAMPLE_SUB_AGENT,
    EXAMPLE_SUB_AGENT_QUESTION,
    EXAMPLES,
)
from modules.statuses import TaskStatus
from test.conftest import wait_until
from test.integration.event_recorder import Recorder, conforms


@pytest.fixture
def demo(make_server):
    return make_server(env={"OPENAI_API_KEY": "", "DEMO_CHUNK_DELAY_S": "0"})


def _assistant_texts(server, cid: str, agent: str | None = None) -> list[str]:
    params = {"agent": agent} if agent else {}
    data = server.get(f"/api/conversations/{cid}/messages", params=params).json()["data"]
    return [m["content"] for m in data if m["role"] == "assistant" and m["content"]]


def _master_says(server, cid: str, needle: str, timeout: float = 40) -> list[str]:
    return wait_until(lambda: (texts := _assistant_texts(server, cid)) and any(needle in t for t in texts) and texts,
                      timeout, what=f"the master to say {needle!r}")


def _check_all_events(server, cid: str, recorder: Recorder) -> set[str]:
    """Every socket event and every logged event of the conversation conforms; returns the types seen."""
    problems = [p for e, d in recorder.seen() if (p := conforms(e, d))]
    tasks = server.get("/api/tasks", params={"conversation_id": cid}).json()["data"]
    logged = [(e["type"], e["data"]) for t in tasks for e in server.get(f"/api/tasks/{t['task_id']}").json()["events"]]
    problems += [p for e, d in logged if (p := conforms(e, d))]
    assert not problems, "\n".join(problems)
    return {e for e, _ in recorder.seen()} | {e for e, _ in logged}


def test_health_lists_the_examples_only_for_the_demo_model(demo, server):
    assert demo.get("/healthz").json()["examples"] == list(EXAMPLES)
    assert "examples" not in server.get("/healthz").json()


def test_every_example_shows_its_mechanism_and_every_event_conforms(demo):
    recorder = Recorder(demo.url)
    try:
        cid = demo.post("/api/conversations", {"title": "demo"}).json()["conversation_id"]
        recorder.join(cid)

        # A background command: started, and its completion notice makes the master report it.
        sent = demo.send(EXAMPLE_BACKGROUND_COMMAND, cid)
        task = demo.wait_task(sent["task_id"], timeout=30)
        start = next(e["data"] for e in task["events"] if e["type"] == ToolStartEvent.TYPE)
        assert start["name"] == "run_command" and '"run_in_background": true' in start["arguments"]
        # (its reply at the start names the command too: the notice's report is what says how it ended)
        _master_says(demo, cid, "`sleep 3; echo background work done` has succeeded")
        suggested = demo.wait_event(sent["task_id"], SuggestionsEvent.TYPE)["questions"]
        assert suggested and set(suggested) <= set(EXAMPLES) and EXAMPLE_BACKGROUND_COMMAND not in suggested

        # A question to the user: the card's answer reaches the blocked tool.
        sent = demo.send(EXAMPLE_ASK_USER, cid)
        asked = demo.wait_event(sent["task_id"], AskUserEvent.TYPE, timeout=30)
        assert asked["options"] == ["Lisbon", "Porto"]
        demo.send("Porto", cid, question_id=asked["question_id"])
        assert demo.wait_task(sent["task_id"], timeout=30)["status"] == TaskStatus.SUCCEEDED
        _master_says(demo, cid, "You chose **Porto**")

        # A background sub-agent that reports back.
        sent = demo.send(EXAMPLE_SUB_AGENT, cid)
        assert demo.wait_task(sent["task_id"], timeout=30)["status"] == TaskStatus.SUCCEEDED
        _master_says(demo, cid, "InfoAgent_1 reported back")
        assert any("Belem Tower" in t for t in _assistant_texts(demo, cid, "InfoAgent_1"))

        # A sub-agent's question to the master, answered by the master's tool.
        sent = demo.send(EXAMPLE_SUB_AGENT_QUESTION, cid)
        assert demo.wait_task(sent["task_id"], timeout=30)["status"] == TaskStatus.SUCCEEDED
        texts = _master_says(demo, cid, "InfoAgent_2 reported back")
        assert any("InfoAgent_2 asks me a question" in t for t in texts)
        assert any("My master decided: Lisbon" in t for t in _assistant_texts(demo, cid, "InfoAgent_2"))
        wait_until(lambda: all(t["status"] in (TaskStatus.SUCCEEDED, TaskStatus.FAILED, TaskStatus.STOPPED) for t in
                               demo.get("/api/tasks", params={"conversation_id": cid}).json()["data"]),
                   30, what="every task to end")
        seen = _check_all_events(demo, cid, recorder)
    finally:
        recorder.client.disconnect()
    assert {UserMessageEvent.TYPE, RouteEvent.TYPE, AiMessageStartEvent.TYPE, TextChunkEvent.TYPE, TextEndEvent.TYPE,
            ToolStartEvent.TYPE, ToolResultEvent.TYPE,
            AgentStateEvent.TYPE, AskUserEvent.TYPE, SuggestionsEvent.TYPE, TaskCompleteEvent.TYPE} <= seen, seen

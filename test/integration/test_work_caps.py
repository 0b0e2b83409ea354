"""Caps on running work (README, "Configuration": MAX_COMMANDS_*, MAX_SUB_AGENTS_*): one step that starts
dozens of background commands or sub-agents gets a tool error for each past the cap, nothing of it is
started, and the other user starts work and is answered as before."""

from __future__ import annotations

import json
import time

import pytest
import requests

from modules.event_catalogue import ToolResultEvent
from test.conftest import TWO_USERS
from test.integration.sandbox_helpers import send_routed
from test.scripted_llm import text, tool_calls
from test.scripted_steps import hang, match_system

MASTER = match_system("You are MasterAgent")
SUB_AGENT = match_system("You are InfoAgent")


@pytest.fixture
def capped(make_server):
    server = make_server(env={"AUTH_TOKENS": TWO_USERS, "MAX_COMMANDS_PER_CONVERSATION": "5",
                              "MAX_COMMANDS_PER_USER": "8", "MAX_SUB_AGENTS_PER_CONVERSATION": "2",
                              "MAX_SUB_AGENTS_PER_USER": "3"})
    server.token = "tok-alice"
    return server


def one_step(server, llm, calls: list[tuple[str, dict]], token: str, conversation_id: str | None = None
             ) -> tuple[list[dict], str]:
    """One master turn whose model makes `calls` at once; their results, and the conversation id."""
    llm.script(tool_calls(*calls), match=MASTER)
    llm.script(text("started what I could"), match=MASTER)
    sent = send_routed(server, "start it all", token=token, conversation_id=conversation_id)
    task = server.wait_task(sent["task_id"], timeout=60, token=token)
    results = [json.loads(e["data"]["result"]) for e in task["events"] if e["type"] == ToolResultEvent.TYPE]
    return results, sent["conversation_id"]


def sleeps(n: int, marker: str) -> list[tuple[str, dict]]:
    return [("run_command", {"command": f"sleep 60.{marker}{i:02d}", "run_in_background": True}) for i in range(n)]


def test_a_step_of_many_commands_and_sub_agents_stops_at_the_caps(capped, llm):
    server = capped
    results, first = one_step(server, llm, sleeps(20, "41"), "tok-alice")
    assert [r["success"] for r in results] == [True] * 5 + [False] * 15
    assert all("MAX_COMMANDS_PER_CONVERSATION" in r["error"] for r in results[5:])

    results, second = one_step(server, llm, sleeps(5, "42"), "tok-alice")  # alice's second conversation
    assert [r["success"] for r in results] == [True] * 3 + [False] * 2
    assert all("MAX_COMMANDS_PER_USER" in r["error"] for r in results[3:])
    for cid, count in ((first, 5), (second, 3)):
        listed = server.get(f"/api/background_commands?conversation_id={cid}").json()["data"]
        assert [c["status"] for c in listed] == ["running"] * count

    started = time.monotonic()
    results, _ = one_step(server, llm, sleeps(3, "43"), "tok-bob")  # bob has caps of his own
    assert [r["success"] for r in results] == [True] * 3
    assert time.monotonic() - started < 30
    took = time.monotonic()
    assert requests.get(server.url + "/healthz", timeout=5).status_code == 200
    assert time.monotonic() - took < 1

    for _ in range(4):
        llm.script(hang(30), match=SUB_AGENT)  # the sub-agents stay busy
    create = [("create_sub_agent", {"role": "InfoAgent", "task": f"research {i}", "run_in_background": True})
              for i in range(4)]
    results, cid = one_step(server, llm, create, "tok-alice")
    assert [r["success"] for r in results] == [True, True, False, False], results
    assert all("MAX_SUB_AGENTS_PER_CONVERSATION" in r["error"] for r in results[2:])
    results, _ = one_step(server, llm, create[:2], "tok-alice")
    assert [r["success"] for r in results] == [True, False], results
    assert "MAX_SUB_AGENTS_PER_USER" in results[1]["error"]
    agents = server.get(f"/api/conversations/{cid}/agents").json()["data"]
    assert len([a for a in agents if a["role"] == "InfoAgent"]) == 2

"""Helpers of the integration tests that read a conversation back through the REST API (or make a long one), the
scripted model's matchers for its agents, and a watch on how fast the server answers meanwhile."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import requests

from modules.statuses import MessageSource, TaskStatus
from test.scripted_steps import Match, match_system, text, tool_calls

MASTER = match_system("You are MasterAgent")
FAILED_CALLS = 260  # `busy_conversation`'s failed tool calls in one turn: more messages than an export reads at once


def sub(n: int, role: str = "InfoAgent") -> Match:
    """The matcher of the n-th sub-agent of a role (`InfoAgent_1`, ...)."""
    return match_system(f"You are {role}_{n} ")


def master_tasks(server: Any, cid: str) -> list[dict[str, Any]]:
    """The master's tasks of the conversation, oldest first."""
    master = server.get(f"/api/conversations/{cid}/agents").json()["data"][0]
    return [t for t in server.get(f"/api/tasks?conversation_id={cid}").json()["data"]
            if t["agent_id"] == master["agent_id"]]


def history(server: Any, cid: str, agent: str | None = None) -> list[dict[str, Any]]:
    """An agent's history (the master's by default)."""
    path = f"/api/conversations/{cid}/messages" + (f"?agent={agent}" if agent else "")
    return server.get(path).json()["data"]


def busy_conversation(server: Any, llm: Any) -> str:
    """A conversation of two agents: a blocking sub-agent's run, then FAILED_CALLS failed tool calls in one turn
    (more messages than a page or an export's batch), texts with quotes, Unicode and trailing white space, and a
    Regenerate copy (which the export leaves out)."""
    llm.script(tool_calls(("create_sub_agent", {"role": "InfoAgent", "task": "find opening hours",
                                                "run_in_background": False})), match=MASTER)
    llm.script(text("Open 10:00–18:00 ✓\n\n  "), match=sub(1))
    llm.script(tool_calls(*[("terminate_sub_agent", {"display_name": f"Nobody_{n}"})
                            for n in range(FAILED_CALLS)]), match=MASTER)
    llm.script(text("The museum opens at ten.\n```\ncode\n```"), match=MASTER)
    sent = server.send("When does the museum \"open\"?\nThanks")
    assert server.wait_task(sent["task_id"], timeout=60)["status"] == TaskStatus.SUCCEEDED
    cid = sent["conversation_id"]
    llm.script(text("It opens at 10:00.   "), match=MASTER)
    regenerated = server.post(f"/api/conversations/{cid}/regenerate")
    assert regenerated.status_code == 202, regenerated.text
    assert server.wait_task(regenerated.json()["task_id"])["status"] == TaskStatus.SUCCEEDED
    return cid


def all_conversations(server: Any, token: str | None = None, **params: Any) -> list[dict[str, Any]]:
    """Every conversation of the caller, newest first: the list's pages followed by their `next_cursor`."""
    found: list[dict[str, Any]] = []
    cursor = None
    for _ in range(1000):
        res = server.get("/api/conversations", params={**params, **({"before": cursor} if cursor else {})},
                         token=token)
        assert res.status_code == 200, res.text
        found += res.json()["data"]
        cursor = res.json()["next_cursor"]
        if cursor is None:
            return found
    raise AssertionError("the conversation list's pages never ended")


def notices(msgs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The completion notices among history entries."""
    return [m for m in msgs if m["role"] == "user" and m["metadata"].get("source") in (MessageSource.SUB_AGENT,
                                                                                      MessageSource.BACKGROUND_COMMAND)]


def healthz_s(server: Any) -> float:
    """How long `/healthz` took to answer (200)."""
    started = time.monotonic()
    assert requests.get(server.url + "/healthz", timeout=10).status_code == 200
    return time.monotonic() - started


@contextmanager
def slowest_healthz(server: Any) -> Iterator[list[float]]:
    """`/healthz` asked again and again while the block runs: the list it yields holds the slowest answer's seconds
    (a server whose event loop some work holds answers late)."""
    stop = threading.Event()
    slowest = [0.0]

    def watch() -> None:
        while not stop.is_set():
            slowest[0] = max(slowest[0], healthz_s(server))

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield slowest
    finally:
        stop.set()
        watcher.join(15)

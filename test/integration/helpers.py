"""Helpers of the integration tests that read a conversation back through the REST API, the scripted model's
matchers for its agents, and a watch on how fast the server answers meanwhile."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import requests

from modules.statuses import MessageSource
from test.scripted_steps import Match, match_system

MASTER = match_system("You are MasterAgent")


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

"""Small page helpers shared by the browser tests."""

from __future__ import annotations

import re
import time
from typing import Any

from playwright.sync_api import Locator, Page, expect

from test.conftest import ServerProcess
from test.scripted_llm import match_system

SUGGEST = match_system("You suggest what the user may want to say next")


def send(page: Page, message: str) -> None:
    box = page.get_by_test_id("message-input")
    box.fill(message)
    box.press("Enter")
    expect(box).to_have_value("")


def conversation_id(page: Page) -> str:
    expect(page).to_have_url(re.compile(r"#/c/[^/]+$"))
    return page.url.rsplit("#/c/", 1)[1]


def assistant(page: Page) -> Locator:
    return page.get_by_test_id("chat").get_by_test_id("assistant-message")


def state(page: Page) -> dict[str, Any]:
    """The chat state the page exposes for tests (window.__agentChat.state)."""
    return page.evaluate(
        "() => { const s = window.__agentChat.state;"
        " return { running: [...s.running], textMismatches: s.textMismatches,"
        " conversationId: s.conversationId }; }"
    )


def wait_connected(page: Page) -> None:
    expect(page.get_by_test_id("connection-status")).to_have_attribute("data-state", "connected")


def only_task(server: ServerProcess, cid: str, timeout: float = 10) -> str:
    """The id of the conversation's single task (created by the page's send)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        tasks = server.get(f"/api/tasks?conversation_id={cid}").json()["data"]
        if tasks:
            assert len(tasks) == 1, tasks
            return tasks[0]["task_id"]
        time.sleep(0.05)
    raise TimeoutError(f"no task in conversation {cid}")


def suggest_for(user_text: str):
    """This test's suggestion call. The package shares one server, so a late suggestion call of an
    earlier test must not take this test's scripted answer."""
    return lambda body: SUGGEST(body) and user_text in body["messages"][-1]["content"]


def open_synthetic_conversation(open_page, server: ServerProcess, title: str) -> tuple[Page, str, str]:
    """A new conversation opened in a page, for events made up by the test: (page, id, master's agent id)."""
    conv = server.post("/api/conversations", {"title": title}).json()
    cid, master = conv["conversation_id"], conv["agents"][0]["agent_id"]
    page = open_page(server, path=f"/#/c/{cid}")
    wait_opened(page, title)
    return page, cid, master


def wait_opened(page: Page, title: str) -> None:
    """The conversation titled `title` is open and its history loaded. The title comes first: before the page
    opens the conversation nothing is loading either, so the spinner's absence alone proves nothing."""
    expect(page.get_by_test_id("conversation-title")).to_have_text(title)
    expect(page.get_by_test_id("timeline-loading")).to_have_count(0)


def inject(page: Page, cid: str, agent_id: str, task_id: str, events: list[tuple[int, str, dict]]) -> None:
    """Feed made-up task events (API.md shapes) through the page's socket entry (`chat.ingest`)."""
    payload = [
        {"type": kind, "data": {**data, "task_id": task_id, "conversation_id": cid, "agent_id": agent_id, "idx": idx}}
        for idx, kind, data in events
    ]
    page.evaluate("(evs) => evs.forEach((e) => window.__agentChat.chat.ingest(e))", payload)

"""A long conversation in the browser against the real server: it opens on its latest turns, and earlier ones
come as the reader scrolls up (or asks), with what was being read kept in place."""

from __future__ import annotations

from playwright.sync_api import expect

from modules.storage import messages as message_store
from modules.storage.db import Database
from modules.storage.messages import MessageDraft
from test.browser.helpers import wait_opened

TURNS = 150  # 300 items: more than the 120 a conversation opens with


def _stored_turns(database_url: str, cid: str, agent_id: str) -> None:
    """TURNS questions and answers written straight into the master's history, as hours of talk leave them."""
    db = Database(database_url)
    try:
        with db.write() as s:
            message_store.append_in(s, cid, agent_id, [
                draft for i in range(TURNS) for draft in (
                    MessageDraft(role="user", content=f"question {i}"),
                    MessageDraft(role="assistant", content=f"answer {i}"))])
    finally:
        db.dispose()


def test_a_long_conversation_opens_on_its_latest_turns_and_earlier_ones_come_as_the_reader_scrolls_up(
        open_page, ui_server):
    conv = ui_server.post("/api/conversations", {"title": "Hours of talk"}).json()
    _stored_turns(ui_server.database_url, conv["conversation_id"], conv["agents"][0]["agent_id"])
    page = open_page(ui_server, path=f"/#/c/{conv['conversation_id']}")
    wait_opened(page, "Hours of talk")
    texts = page.get_by_test_id("user-text")

    expect(texts.last).to_have_text(f"question {TURNS - 1}")
    expect(texts.first).to_have_text("question 90")  # the last 120 items: turns 90 to 149
    read = texts.filter(has_text="question 90")
    page.get_by_test_id("timeline").evaluate("el => { el.scrollTop = 0; }")

    expect(texts.first).to_have_text("question 30")
    expect(read).to_be_in_viewport()  # what was on screen stays there: the new turns went in above it
    page.get_by_test_id("show-earlier").click()
    expect(texts.first).to_have_text("question 0")
    expect(texts).to_have_count(TURNS)
    expect(page.get_by_test_id("show-earlier")).to_have_count(0)

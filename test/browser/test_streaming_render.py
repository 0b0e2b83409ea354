"""A streaming reply re-renders only its last, growing block: what is complete is rendered once."""

from __future__ import annotations

from playwright.sync_api import expect

from modules.event_catalogue import AiMessageStartEvent, TextChunkEvent
from test.browser.helpers import assistant, inject, open_synthetic_conversation

OPENING = "## Plan\n\nFirst, the parser reads the file.\n\n```python\nx = 1\n```\n\n- one\n- two\n\nThen"


def test_complete_blocks_stay_the_same_nodes_while_the_reply_grows(open_page, ui_server, llm):
    page, cid, master = open_synthetic_conversation(open_page, ui_server, "streaming blocks")
    inject(page, cid, master, "task-g", [
        (0, AiMessageStartEvent.TYPE, {"message_id": "reply-g", "display_name": "MasterAgent"}),
        (1, TextChunkEvent.TYPE, {"message_id": "reply-g", "content": OPENING}),
    ])  # fmt: skip
    body = assistant(page).get_by_test_id("assistant-text")
    expect(body).to_contain_text("Then")
    page.evaluate(
        """(b) => { window.__kept = [...b.querySelectorAll('h2, p, pre, ul')].slice(0, 4); window.__removed = [];
        new MutationObserver((rs) => rs.forEach((r) => r.removedNodes.forEach((n) =>
          n.nodeType === 1 && window.__removed.push(n.tagName)))).observe(b, { childList: true }); }""",
        body.element_handle(),
    )
    for i in range(12):
        inject(page, cid, master, "task-g", [(2 + i, TextChunkEvent.TYPE, {"message_id": "reply-g",
                                                                           "content": f" more{i}"})])
        expect(body).to_contain_text(f"more{i}")
    last = "\n\nA last paragraph."
    inject(page, cid, master, "task-g", [(14, TextChunkEvent.TYPE, {"message_id": "reply-g", "content": last})])
    expect(body).to_contain_text("A last paragraph.")
    kept = page.evaluate("() => window.__kept.map((n) => n.isConnected ? n.tagName : 'gone')")
    assert kept == ["H2", "P", "PRE", "UL"], kept
    # only the growing paragraph was replaced, once a frame at most
    removed = page.evaluate("() => window.__removed")
    assert set(removed) <= {"P"}, removed

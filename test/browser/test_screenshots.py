"""Screenshots of the main screens (and a check that they render).

`UPDATE_SCREENSHOTS=1 pytest test/browser/test_screenshots.py` writes them to docs/screenshots/;
otherwise they go to a temporary directory.
"""

from __future__ import annotations

import hashlib
import struct
import threading

from playwright.sync_api import expect

from modules.statuses import AgentState
from test.browser.conftest import PHONE, screenshot_dir
from test.browser.helpers import assistant, conversation_id, send, suggest_for
from test.scripted_llm import match_system, text, tool_calls

MASTER = match_system("You are MasterAgent")

REPLY = (
    "The workspace holds a small Flask service; its entry point:\n\n"
    '```python\napp = create_app()\nif __name__ == "__main__":\n    app.run(port=5000)\n```\n\n'
    "**Next:** CoderAgent_1 runs the suite and InfoAgent_1 checks the packaging guide; "
    "I will report back when they finish."
)
DESKTOP_SHOT = {"width": 1360, "height": 1080}


def test_screenshots_of_the_main_screens(open_page, ui_server, llm, tmp_path):
    out = screenshot_dir(tmp_path)
    coder_gate, info_gate = threading.Event(), threading.Event()
    llm.script(
        tool_calls(("run_command", {"command": "ls -la && python3 --version"}), text="Let me look first."),
        tool_calls(
            ("create_sub_agent", {"role": "CoderAgent", "task": "Run the test suite and report failures"}),
            ("create_sub_agent", {"role": "InfoAgent", "task": "Check the Python packaging guide"}),
            text="I'll split the work.",
        ),
        text(REPLY, chunk_size=40),
        text("CoderAgent_1 reports that **all 12 tests pass**."),
        text("InfoAgent_1 confirms the packaging layout is fine."),
        match=MASTER,
    )
    llm.script(text("All 12 tests pass.", wait=coder_gate), match=match_system("You are CoderAgent_1 "))
    llm.script(text("The layout follows the guide.", wait=info_gate), match=match_system("You are InfoAgent_1 "))
    llm.script(text('{"questions": ["continue", "Show the slowest tests", "Add a README"]}'),
               match=suggest_for("What is in the workspace"))
    page = open_page(ui_server, viewport=DESKTOP_SHOT)
    try:
        send(page, "What is in the workspace, and do the tests pass?")
        expect(assistant(page).get_by_test_id("assistant-text").filter(has_text="Next:")).to_have_count(1)
        coder_gate.set()
        expect(page.get_by_test_id("notice")).to_have_count(1)
        expect(assistant(page).last.get_by_test_id("assistant-text")).to_contain_text("all 12 tests pass")
        expect(page.get_by_test_id("suggestion-chip")).to_have_count(3)
        page.get_by_test_id("tool-toggle").first.click()
        expect(page.get_by_test_id("tool-output")).to_be_visible()
        expect(page.get_by_test_id("agent-row").filter(has_text="InfoAgent_1")).to_have_attribute(
            "data-state", AgentState.RUNNING
        )
        assistant(page).last.scroll_into_view_if_needed()
        page.screenshot(path=out / "chat-desktop.png")
        page.emulate_media(color_scheme="dark")  # dark mode follows the system
        page.screenshot(path=out / "chat-desktop-dark.png")
        page.emulate_media(color_scheme="light")

        page.get_by_test_id("agent-row").filter(has_text="CoderAgent_1").click()
        history = page.get_by_test_id("agent-history")
        expect(history.get_by_test_id("assistant-text")).to_have_text("All 12 tests pass.")
        page.screenshot(path=out / "team-panel.png")

        cid = conversation_id(page)
        phone = open_page(ui_server, viewport=PHONE, path=f"/#/c/{cid}")
        expect(assistant(phone).last).to_have_attribute("data-done", "true")
        phone.screenshot(path=out / "phone-chat.png")
        phone.emulate_media(color_scheme="dark")
        phone.screenshot(path=out / "phone-chat-dark.png")
        phone.emulate_media(color_scheme="light")
        phone.get_by_test_id("toggle-conversations").click()
        expect(phone.get_by_test_id("conversation-sidebar")).to_be_in_viewport()
        phone.screenshot(path=out / "phone-conversations.png")
        phone.get_by_test_id("conversation-item").first.click()
        phone.get_by_test_id("toggle-team").click()
        expect(phone.get_by_test_id("team-panel").get_by_test_id("agent-row")).to_have_count(3)
        phone.screenshot(path=out / "phone-team.png")
    finally:
        info_gate.set()
    # let the last follow-up finish here, so no work outlives the test
    expect(assistant(page).last.get_by_test_id("assistant-text")).to_have_text(
        "InfoAgent_1 confirms the packaging layout is fine."
    )
    expect(page.get_by_test_id("stop-button")).to_have_count(0)
    sizes = {"chat-desktop": DESKTOP_SHOT, "chat-desktop-dark": DESKTOP_SHOT, "team-panel": DESKTOP_SHOT,
             "phone-chat": PHONE, "phone-chat-dark": PHONE, "phone-conversations": PHONE, "phone-team": PHONE}
    images = {name: (out / f"{name}.png").read_bytes() for name in sizes}
    for name, viewport in sizes.items():
        assert _png_size(images[name]) == (viewport["width"], viewport["height"]), name
    # Seven different screens: a blank or stuck page would give identical images.
    assert len({hashlib.sha256(data).digest() for data in images.values()}) == len(images)


def _png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", "not a PNG"
    return struct.unpack(">II", data[16:24])


def test_screenshot_of_versions_and_attachments(open_page, ui_server, llm, tmp_path):
    """A turn with two versions (‹ 2/2 ›), a message with its file, and a file chip waiting in the composer."""
    out = screenshot_dir(tmp_path)
    llm.script(text("Send it over and I will read it."),
               text("The CSV has **3 rows**: Lisbon, Porto and Faro."),
               text("`/workspace/cities.csv` lists **3 cities** (Lisbon, Porto, Faro), one per row."),
               match=MASTER)  # fmt: skip
    page = open_page(ui_server, viewport={"width": 1100, "height": 640})
    send(page, "I have a list of cities for you")
    expect(assistant(page).last).to_have_attribute("data-done", "true")
    cities, plan = tmp_path / "cities.csv", tmp_path / "trip-plan.md"
    cities.write_text("city\nLisbon\nPorto\nFaro\n")
    plan.write_text("# Trip\n")
    page.get_by_test_id("file-input").set_input_files(str(cities))
    expect(page.get_by_test_id("attachment-chip")).to_have_count(1)
    send(page, "How many cities are in it?")
    expect(assistant(page).last.get_by_test_id("assistant-text")).to_contain_text("3 rows")
    assistant(page).last.get_by_test_id("regenerate").click()
    expect(page.get_by_test_id("version-label")).to_have_text("2/2")
    expect(assistant(page).last).to_have_attribute("data-done", "true")
    page.get_by_test_id("file-input").set_input_files(str(plan))
    expect(page.get_by_test_id("attachment-chip")).to_have_count(1)
    page.get_by_test_id("close-team").click()
    page.get_by_test_id("user-message").last.hover()
    page.screenshot(path=out / "versions-and-attachments.png")
    assert _png_size((out / "versions-and-attachments.png").read_bytes()) == (1100, 640)

"""The everyday features of a chat app (issue 11), in the browser against the real server: copy buttons,
message times, jump to latest, edit and resend, dark mode, rename, search, delete, export, regenerate, uploads
and the demo's example chips.

The tests marked `server_feature` need the REST endpoints of the server side of issue 11 (rename,
delete, search, export, regenerate, workspace files, demo examples): they skip, saying so, on a
server without them, and run by themselves once both sides are merged.
"""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from test.browser.helpers import assistant, conversation_id, send, wait_connected
from test.conftest import ServerProcess
from test.scripted_llm import match_system, text

MASTER = match_system("You are MasterAgent")
CODE_REPLY = "Here:\n\n```python\nprint('copied')\n```\n\nDone."


def _require(server: ServerProcess, method: str, path: str) -> None:
    """Skip unless the server's /openapi.json lists `method path` (parameters may be named anything)."""
    spec = server.get("/openapi.json").json()
    wanted = re.sub(r"\{[^}]+\}", "{}", path)
    for key, ops in spec.get("paths", {}).items():
        if re.sub(r"\{[^}]+\}", "{}", key) == wanted and method.lower() in ops:
            return
    pytest.skip(f"the server lacks {method} {path} (issue 11's server side): run after the merge")


def _clipboard(page) -> str:
    return page.evaluate("() => navigator.clipboard.readText()")


def test_copy_buttons_copy_a_message_and_a_code_block(page, ui_server, llm):
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    llm.script(text(CODE_REPLY), match=MASTER)
    send(page, "show code")
    reply = assistant(page)
    expect(reply).to_have_attribute("data-done", "true")
    reply.get_by_test_id("copy-code").click()
    expect(reply.get_by_test_id("copy-code")).to_have_text("Copied")
    assert _clipboard(page) == "print('copied')"
    reply.get_by_test_id("copy-message").click()
    assert _clipboard(page) == CODE_REPLY
    user = page.get_by_test_id("user-message")
    user.get_by_test_id("copy-message").click()
    assert _clipboard(page) == "show code"


def test_messages_show_their_time_also_after_a_reload(page, ui_server, llm):
    llm.script(text("On time."), match=MASTER)
    send(page, "what time is it")
    expect(assistant(page)).to_have_attribute("data-done", "true")
    clock = re.compile(r"^\d{1,2}:\d{2}")
    for pg_reload in (False, True):
        if pg_reload:
            page.reload()
        expect(page.get_by_test_id("user-message").get_by_test_id("msg-time")).to_have_text(clock)
        expect(assistant(page).get_by_test_id("msg-time")).to_have_text(clock)


def test_jump_to_latest_appears_when_scrolled_up(page, ui_server, llm):
    long = "\n\n".join(f"Paragraph {i} of a long answer." for i in range(80))
    llm.script(text(long, chunk_size=400), match=MASTER)
    send(page, "a long answer please")
    expect(assistant(page)).to_have_attribute("data-done", "true")
    expect(page.get_by_test_id("jump-latest")).to_have_count(0)
    page.get_by_test_id("timeline").evaluate("el => { el.scrollTop = 0; el.dispatchEvent(new Event('scroll')); }")
    jump = page.get_by_test_id("jump-latest")
    expect(jump).to_be_visible()
    jump.click()
    expect(jump).to_have_count(0)
    expect(assistant(page).get_by_test_id("assistant-text").get_by_text("Paragraph 79")).to_be_in_viewport()


def test_edit_and_resend_the_last_message(page, ui_server, llm):
    llm.script(text("Paris."), text("Lisbon."), match=MASTER)
    send(page, "capital of France?")
    expect(assistant(page)).to_have_attribute("data-done", "true")
    users = page.get_by_test_id("user-message")
    users.last.get_by_test_id("edit-message").click()
    box = page.get_by_test_id("message-input")
    expect(box).to_have_value("capital of France?")
    expect(box).to_be_focused()
    box.fill("capital of Portugal?")
    box.press("Enter")
    expect(assistant(page).last.get_by_test_id("assistant-text")).to_have_text("Lisbon.")
    # the edit is a new version of the turn (test_turn_versions.py): one turn shows, the newest
    expect(users.get_by_test_id("user-text")).to_have_text(["capital of Portugal?"])
    expect(users.get_by_test_id("version-label")).to_have_text("2/2")


def test_dark_mode_follows_the_system_and_the_toggle(open_page, ui_server, llm):
    page = open_page(ui_server)
    bg = "() => getComputedStyle(document.documentElement).backgroundColor"
    page.emulate_media(color_scheme="dark")
    assert page.evaluate(bg) == "rgb(17, 20, 24)"
    toggle = page.get_by_test_id("theme-toggle")
    toggle.click()  # system -> light
    expect(toggle).to_have_attribute("data-theme-choice", "light")
    assert page.evaluate(bg) == "rgb(255, 255, 255)"
    toggle.click()  # light -> dark
    page.emulate_media(color_scheme="light")
    assert page.evaluate(bg) == "rgb(17, 20, 24)"
    page.reload()
    expect(page.get_by_test_id("theme-toggle")).to_have_attribute("data-theme-choice", "dark")
    assert page.evaluate(bg) == "rgb(17, 20, 24)"

    # A code block follows the theme too: dark ground, light text and its own token colours.
    llm.script(text("```python\nif ready:\n    print('go')\n```"), match=MASTER)
    send(page, "show me some code")
    block = page.locator("pre.code-block").first
    expect(block).to_be_visible()
    style = "el => [getComputedStyle(el).backgroundColor, getComputedStyle(el.querySelector('.hljs-keyword')).color]"
    assert block.evaluate(style) == ["rgb(13, 17, 23)", "rgb(255, 123, 114)"]
    toggle.click()  # dark -> system (light here)
    expect(toggle).to_have_attribute("data-theme-choice", "system")
    assert block.evaluate(style) == ["rgb(246, 248, 250)", "rgb(215, 58, 73)"]


# ---- with the server side of issue 11 -------------------------------------------------------------

def test_rename_search_and_delete_conversations(page, ui_server, llm):
    _require(ui_server, "PATCH", "/api/conversations/{cid}")
    llm.script(text("Noted."), match=MASTER)
    send(page, "remember the zebra")
    expect(assistant(page)).to_have_attribute("data-done", "true")
    cid = conversation_id(page)
    row = page.get_by_test_id("conversation-item").and_(page.locator(f'[data-conversation-id="{cid}"]'))
    page.locator(".conv-row", has=row).get_by_test_id("conversation-menu").click()
    page.get_by_test_id("rename-conversation").click()
    page.get_by_test_id("rename-input").fill("Zoo notes")
    page.get_by_test_id("rename-input").press("Enter")
    expect(row).to_contain_text("Zoo notes")
    expect(page.get_by_test_id("conversation-title")).to_have_text("Zoo notes")
    assert ui_server.get(f"/api/conversations/{cid}").json()["title"] == "Zoo notes"

    search = page.get_by_test_id("conversation-search")
    search.fill("ZEBRA")  # a message's content, any case
    expect(page.get_by_test_id("conversation-item")).to_have_count(1)
    search.fill("no-such-words-anywhere")
    expect(page.get_by_test_id("conversation-item")).to_have_count(0)
    search.fill("")
    page.locator(".conv-row", has=row).get_by_test_id("conversation-menu").click()
    page.get_by_test_id("delete-conversation").click()
    page.get_by_test_id("delete-yes").click()
    expect(row).to_have_count(0)
    expect(page.get_by_test_id("welcome")).to_be_visible()
    assert ui_server.get(f"/api/conversations/{cid}").status_code == 404


@pytest.mark.parametrize("fmt", ["md", "json"])
def test_export_a_conversation(page, ui_server, llm, fmt):
    _require(ui_server, "GET", "/api/conversations/{cid}/export")
    llm.script(text("Exported answer."), match=MASTER)
    send(page, "export me")
    expect(assistant(page)).to_have_attribute("data-done", "true")
    cid = conversation_id(page)
    page.locator(".conv-row.active").get_by_test_id("conversation-menu").click()
    with page.expect_download() as info:
        page.get_by_test_id(f"export-{fmt}").click()
    body = open(info.value.path(), encoding="utf-8").read()
    assert info.value.suggested_filename.endswith(f".{fmt}")
    if fmt == "json":
        data = json.loads(body)
        assert data["conversation"]["conversation_id"] == cid
        assert any(m.get("content") == "Exported answer." for m in data["agents"][0]["messages"])
    else:
        assert "export me" in body and "Exported answer." in body


def test_regenerate_the_last_answer_keeps_the_old_one(page, ui_server, llm):
    _require(ui_server, "POST", "/api/conversations/{cid}/regenerate")
    llm.script(text("First answer."), text("Second answer."), match=MASTER)
    send(page, "answer twice")
    expect(assistant(page)).to_have_attribute("data-done", "true")
    assistant(page).get_by_test_id("regenerate").click()
    expect(assistant(page).last.get_by_test_id("assistant-text")).to_have_text("Second answer.")
    page.reload()
    # the old answer is the turn's first version, one click away (test_turn_versions.py)
    expect(assistant(page).get_by_test_id("assistant-text")).to_have_text(["Second answer."])
    expect(page.get_by_test_id("user-message")).to_have_count(1)
    page.get_by_test_id("version-prev").click()
    expect(assistant(page).get_by_test_id("assistant-text")).to_have_text(["First answer."])


def test_upload_a_file_into_the_workspace(make_server, open_page, llm, tmp_path):
    server = make_server(env={"UPLOAD_MAX_MB": "1"})
    _require(server, "POST", "/api/conversations/{cid}/files")
    llm.script(text("Ready."), match=MASTER)
    page = open_page(server)
    send(page, "I will send a file")
    expect(assistant(page)).to_have_attribute("data-done", "true")
    small = tmp_path / "notes.txt"
    small.write_text("hello workspace\n")
    page.get_by_test_id("file-input").set_input_files(str(small))
    files = page.get_by_test_id("workspace-panel").get_by_test_id("workspace-file")
    expect(files).to_have_count(1)
    expect(files).to_have_attribute("data-name", "notes.txt")
    cid = conversation_id(page)
    listed = server.get(f"/api/conversations/{cid}/files").json()["data"]
    assert [(f["name"], f["size"]) for f in listed] == [("notes.txt", 16)]
    big = tmp_path / "big.bin"
    big.write_bytes(b"x" * (2 * 1024 * 1024))
    page.get_by_test_id("file-input").set_input_files(str(big))
    expect(page.get_by_test_id("upload-error")).to_contain_text("too large")
    expect(files).to_have_count(1)


def test_the_demo_examples_are_chips_on_the_empty_screen(make_server, open_page, llm):
    server = make_server(env={"OPENAI_API_KEY": "", "DEMO_CHUNK_DELAY_S": "0"})
    examples = server.get("/healthz").json().get("examples")
    if not examples:
        pytest.skip("the server's /healthz has no demo examples (issue 11's server side): run after the merge")
    page = open_page(server)
    wait_connected(page)
    expect(page.get_by_test_id("example-chip")).to_have_text(examples)

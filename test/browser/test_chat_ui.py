"""The chat UI in a real browser against the real server and the scripted model."""

from __future__ import annotations

import threading

from playwright.sync_api import expect

from modules.statuses import AgentState, Route, TaskStatus
from test.browser.conftest import PHONE
from test.browser.helpers import assistant, conversation_id, only_task, send, state, wait_connected
from test.scripted_llm import error, text, tool_calls

MARKDOWN_REPLY = (
    "Here is **bold** and `inline code`.\n\n"
    '```python\ndef greet(name):\n    return f"hello {name}"\n```\n\n'
    "- first\n- second\n\n"
    '<img src="x" onerror="window.__xss = 1"><script>window.__xss = 2</script>'
)


def test_send_streams_markdown_with_highlighted_code(page, ui_server, llm):
    release = threading.Event()
    llm.script(text(MARKDOWN_REPLY, chunk_size=7, wait=release))
    wait_connected(page)
    expect(page.get_by_test_id("welcome")).to_be_visible()
    expect(page.get_by_test_id("demo-banner")).to_have_count(0)

    send(page, "show me some markdown")
    user = page.get_by_test_id("user-message")
    expect(user).to_have_count(1)
    expect(user.get_by_test_id("user-text")).to_have_text("show me some markdown")
    expect(user.get_by_test_id("route-badge")).to_have_attribute("data-route", Route.PIPELINE)

    # the reply bubble opens before the model answers, and streams
    reply = assistant(page)
    expect(reply).to_have_attribute("data-done", "false")
    expect(page.get_by_test_id("stop-button")).to_be_visible()
    release.set()
    expect(reply).to_have_attribute("data-done", "true")
    body = reply.get_by_test_id("assistant-text")
    expect(body.locator("strong")).to_have_text("bold")
    expect(body.locator("p code")).to_have_text("inline code")
    expect(body.locator("li")).to_have_count(2)
    code = body.locator("pre code.hljs")
    expect(code).to_contain_text('return f"hello {name}"')
    expect(code.locator("span.hljs-keyword").first).to_have_text("def")
    expect(code.locator("span.hljs-title.function_")).to_have_text("greet")  # highlighting's own classes stay
    # sanitized: no handler attributes, no scripts, nothing ran
    expect(body.locator("img")).to_have_count(1)
    assert body.locator("img").get_attribute("onerror") is None
    expect(body.locator("script")).to_have_count(0)
    assert page.evaluate("() => window.__xss") is None
    expect(reply.get_by_test_id("agent-name")).to_have_text("MasterAgent")
    expect(page.get_by_test_id("stop-button")).to_have_count(0)

    # the new conversation is listed (newest first) under its title
    cid = conversation_id(page)
    first = page.get_by_test_id("conversation-item").first
    expect(first).to_have_attribute("data-conversation-id", cid)
    expect(first).to_contain_text("show me some markdown")
    assert state(page)["textMismatches"] == 0


def test_tool_card_shows_arguments_and_result_and_survives_reload(page, ui_server, llm):
    llm.script(tool_calls(("run_command", {"command": "echo hi-from-tool"}), text="Let me check."))
    llm.script(text("The command printed `hi-from-tool`."))
    send(page, "run echo for me")
    card = page.get_by_test_id("tool-card")
    expect(card).to_have_count(1)
    expect(card).to_have_attribute("data-status", "done")
    expect(card.get_by_test_id("tool-name")).to_have_text("run_command")
    expect(card.get_by_test_id("tool-arguments")).to_have_count(0)  # collapsed
    card.get_by_test_id("tool-toggle").click()
    expect(card.get_by_test_id("tool-fields").locator('[data-key="command"] dd')).to_have_text("echo hi-from-tool")
    card.get_by_test_id("tool-raw-toggle").click()
    expect(card.get_by_test_id("tool-arguments")).to_contain_text('"command": "echo hi-from-tool"')
    expect(card.get_by_test_id("tool-output")).to_contain_text("hi-from-tool")
    expect(card.get_by_test_id("tool-result")).to_contain_text('"exit_code": 0')
    expect(assistant(page)).to_have_count(2)
    expect(assistant(page).last).to_have_attribute("data-done", "true")
    texts = assistant(page).get_by_test_id("assistant-text").all_inner_texts()

    # the stored history renders the same story, once
    page.reload()
    expect(page.get_by_test_id("tool-card")).to_have_count(1)
    expect(assistant(page)).to_have_count(2)
    assert assistant(page).get_by_test_id("assistant-text").all_inner_texts() == texts
    expect(page.get_by_test_id("user-message")).to_have_count(1)
    page.get_by_test_id("tool-toggle").click()
    expect(page.get_by_test_id("tool-output")).to_contain_text("hi-from-tool")


def test_demo_banner_when_the_offline_model_serves(make_server, open_page, llm):
    server = make_server(env={"OPENAI_API_KEY": "", "DEMO_CHUNK_DELAY_S": "0"})
    page = open_page(server)
    banner = page.get_by_test_id("demo-banner")
    expect(banner).to_be_visible()
    expect(banner).to_contain_text("demo model")
    send(page, "run `echo demo-ui`")
    expect(page.get_by_test_id("tool-card")).to_have_attribute("data-status", "done")
    expect(assistant(page).last).to_contain_text("demo-ui")


def test_stop_button_stops_the_running_task(page, ui_server, llm):
    llm.script(tool_calls(("run_command", {"command": "sleep 30"})))
    send(page, "sleep for a while")
    card = page.get_by_test_id("tool-card")
    expect(card).to_have_attribute("data-status", "running")
    page.get_by_test_id("stop-button").click()
    expect(page.get_by_test_id("status-line")).to_have_attribute("data-tone", "stopped")
    expect(page.get_by_test_id("stop-button")).to_have_count(0)
    expect(card).to_have_attribute("data-status", "failed")
    cid = conversation_id(page)
    task = ui_server.wait_task(only_task(ui_server, cid))
    assert task["status"] == TaskStatus.STOPPED
    assert len(llm.agent_requests) == 1
    # the conversation goes on
    llm.script(text("back again"))
    send(page, "hello again")
    expect(assistant(page).last.get_by_test_id("assistant-text")).to_have_text("back again")


def _numbered(n: int) -> str:
    return " ".join(f"w{i:03d}" for i in range(n)) + " END"


def test_connection_dropped_mid_stream_loses_and_doubles_nothing(page, ui_server, llm):
    full = _numbered(80)
    release = threading.Event()
    llm.script(text(full, chunk_size=3, delay_s=0.01, wait=release))
    wait_connected(page)
    send(page, "stream a long answer")
    reply = assistant(page)
    expect(reply).to_have_attribute("data-done", "false")
    cid = conversation_id(page)
    task_id = only_task(ui_server, cid)
    release.set()
    body = reply.get_by_test_id("assistant-text")
    expect(body).to_contain_text("w000")
    page.evaluate("window.__agentChat.disconnect()")
    expect(page.get_by_test_id("connection-status")).to_have_attribute("data-state", "disconnected")

    # the reply finishes on the server while the page is offline
    done = ui_server.wait_task(task_id)
    assert done["status"] == TaskStatus.SUCCEEDED
    partial = body.inner_text()
    assert full.startswith(partial) and partial != full, "the page should have missed part of the stream"

    page.evaluate("window.__agentChat.connect()")
    wait_connected(page)
    expect(reply).to_have_attribute("data-done", "true")
    expect(body).to_have_text(full)
    expect(reply).to_have_count(1)
    expect(page.get_by_test_id("user-message")).to_have_count(1)
    expect(page.get_by_test_id("stop-button")).to_have_count(0)
    assert state(page)["textMismatches"] == 0


def test_transport_dropped_while_streaming_reconnects_by_itself(page, ui_server, llm):
    full = _numbered(100)
    llm.script(text(full, chunk_size=3, delay_s=0.01))
    wait_connected(page)
    send(page, "stream again")
    reply = assistant(page)
    body = reply.get_by_test_id("assistant-text")
    expect(body).to_contain_text("w005")
    page.evaluate("window.__agentChat.dropConnection()")  # the client reconnects on its own
    expect(body).to_have_text(full)
    expect(reply).to_have_attribute("data-done", "true")
    wait_connected(page)
    expect(reply).to_have_count(1)
    assert state(page)["textMismatches"] == 0


def test_opening_a_conversation_mid_stream_attaches_to_the_task(open_page, ui_server, llm):
    full = _numbered(100)
    release = threading.Event()
    llm.script(tool_calls(("run_command", {"command": "echo step-one"}), text="Checking first."))
    llm.script(text(full, chunk_size=3, delay_s=0.01, wait=release))
    first = open_page(ui_server)
    try:
        send(first, "two steps please")
        cid = conversation_id(first)
        expect(first.get_by_test_id("tool-card")).to_have_attribute("data-status", "done")
        expect(assistant(first)).to_have_count(2)
        release.set()
        expect(assistant(first).last.get_by_test_id("assistant-text")).to_contain_text("w010")
        # a second browser opens the conversation while the reply streams
        second = open_page(ui_server, path=f"/#/c/{cid}")
        for pg in (first, second):
            reply = assistant(pg).last
            expect(reply.get_by_test_id("assistant-text")).to_have_text(full)
            expect(reply).to_have_attribute("data-done", "true")
            expect(assistant(pg)).to_have_count(2)
            expect(pg.get_by_test_id("tool-card")).to_have_count(1)
            expect(pg.get_by_test_id("user-message")).to_have_count(1)
            assert state(pg)["textMismatches"] == 0
    finally:
        release.set()


def test_team_panel_lists_agents_and_shows_an_agent_history(page, ui_server, llm):
    release = threading.Event()
    llm.script(text("Team work done.", wait=release))
    send(page, "hello team")
    expect(page.get_by_test_id("team-panel")).to_be_visible()  # open by default on a wide screen
    row = page.get_by_test_id("agent-row").filter(has_text="MasterAgent")
    expect(row).to_have_attribute("data-state", AgentState.RUNNING)
    expect(row.get_by_test_id("agent-role")).to_have_count(0)  # its role is its name: said once
    release.set()
    expect(row).to_have_attribute("data-state", AgentState.COMPLETED)
    row.click()
    history = page.get_by_test_id("agent-history")
    expect(history.get_by_test_id("agent-history-title")).to_have_text("MasterAgent")
    expect(history.get_by_test_id("user-text")).to_have_text("hello team")
    expect(history.get_by_test_id("assistant-text")).to_have_text("Team work done.")
    history.get_by_test_id("close-agent-history").click()
    expect(history).to_have_count(0)


def test_phone_viewport_collapses_the_side_panels(open_page, ui_server, llm):
    llm.script(text("Small screens work too."))
    page = open_page(ui_server, viewport=PHONE)
    sidebar = page.get_by_test_id("conversation-sidebar")
    expect(sidebar).not_to_be_in_viewport()
    expect(page.get_by_test_id("team-panel")).to_have_count(0)
    send(page, "hi from a phone")
    expect(assistant(page).get_by_test_id("assistant-text")).to_have_text("Small screens work too.")
    assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")
    expect(page.get_by_test_id("message-input")).to_be_in_viewport()
    expect(page.get_by_test_id("send-button")).to_be_in_viewport()

    page.get_by_test_id("toggle-conversations").click()
    expect(sidebar).to_be_in_viewport()
    expect(sidebar.get_by_test_id("conversation-item").first).to_contain_text("hi from a phone")
    sidebar.get_by_test_id("conversation-item").first.click()
    expect(sidebar).not_to_be_in_viewport()

    page.get_by_test_id("toggle-team").click()
    team = page.get_by_test_id("team-panel")
    expect(team).to_be_in_viewport()
    team.get_by_test_id("agent-row").first.click()
    expect(page.get_by_test_id("agent-history")).to_be_in_viewport()
    expect(page.get_by_test_id("agent-history").get_by_test_id("assistant-text")).to_have_text(
        "Small screens work too."
    )


def test_a_model_error_is_shown_inline_and_ends_the_run(page, ui_server, llm):
    llm.set_default(error(400, "the model refused this request"))
    send(page, "this will fail")
    line = page.get_by_test_id("status-line")
    expect(line).to_have_attribute("data-tone", "error")
    expect(line).to_contain_text("the model refused this request")
    expect(page.get_by_test_id("stop-button")).to_have_count(0)
    llm.set_default(text("fine now"))
    send(page, "try again")
    expect(assistant(page).last.get_by_test_id("assistant-text")).to_have_text("fine now")


def test_access_token_from_the_settings_popover(make_server, open_page, llm):
    server = make_server(env={"AUTH_TOKENS": "alice:s3cret-token"})
    llm.script(text("hello alice"))
    page = open_page(server)
    expect(page.get_by_test_id("connection-error")).to_contain_text("token")
    page.get_by_test_id("open-settings").click()
    page.get_by_test_id("token-input").fill("s3cret-token")
    page.get_by_test_id("token-save").click()
    wait_connected(page)
    expect(page.get_by_test_id("connection-error")).to_have_count(0)
    send(page, "hi, it is alice")
    expect(assistant(page).get_by_test_id("assistant-text")).to_have_text("hello alice")
    # the token is kept in this browser
    page.reload()
    wait_connected(page)
    expect(page.get_by_test_id("conversation-item")).to_have_count(1)
    expect(assistant(page).get_by_test_id("assistant-text")).to_have_text("hello alice")


def test_a_failed_conversation_creation_keeps_the_message_as_not_sent(page, ui_server, llm):
    def fail_create(route):
        if route.request.method == "POST":
            route.fulfill(status=500, json={"success": False, "code": "internal_error", "error": "database down"})
        else:
            route.fallback()

    wait_connected(page)
    page.route("**/api/conversations", fail_create)
    send(page, "keep this message")
    user = page.get_by_test_id("user-message")
    expect(user.get_by_test_id("user-text")).to_have_text("keep this message")
    expect(user.get_by_test_id("send-error")).to_contain_text("database down")

    page.unroute("**/api/conversations", fail_create)
    llm.script(text("created this time"))
    send(page, "second try")
    expect(assistant(page).get_by_test_id("assistant-text")).to_have_text("created this time")
    expect(page.get_by_test_id("user-message").get_by_test_id("user-text")).to_have_text("second try")


def test_double_clicking_an_example_creates_one_conversation(page, ui_server, llm):
    creates: list[str] = []
    page.on("request", lambda r: r.method == "POST" and r.url.endswith("/api/conversations") and creates.append(r.url))
    llm.script(text("This team plans and runs work."))
    wait_connected(page)
    before = {c["conversation_id"] for c in ui_server.get("/api/conversations").json()["data"]}
    page.get_by_test_id("example-chip").first.dblclick()
    cid = conversation_id(page)
    expect(assistant(page).get_by_test_id("assistant-text")).to_have_text("This team plans and runs work.")
    expect(page.get_by_test_id("user-message")).to_have_count(1)
    after = {c["conversation_id"] for c in ui_server.get("/api/conversations").json()["data"]}
    assert after - before == {cid}
    assert len(creates) == 1


def test_closed_drawers_take_no_focus_and_escape_closes_open_ones(open_page, ui_server, llm):
    page = open_page(ui_server, viewport=PHONE)
    timeline = page.get_by_test_id("timeline")
    expect(timeline).to_have_attribute("role", "log")
    expect(timeline).to_have_attribute("aria-live", "polite")
    sidebar = page.get_by_test_id("conversation-sidebar")
    expect(sidebar).not_to_be_in_viewport()
    focus_in_sidebar = "() => !!document.activeElement?.closest('[data-testid=conversation-sidebar]')"
    page.get_by_test_id("open-settings").focus()
    for _ in range(3):
        page.keyboard.press("Tab")
        assert not page.evaluate(focus_in_sidebar)

    toggle = page.get_by_test_id("toggle-conversations")
    toggle.click()
    expect(sidebar).to_be_in_viewport()
    new_conversation = sidebar.get_by_test_id("new-conversation")
    new_conversation.focus()
    expect(new_conversation).to_be_focused()
    page.keyboard.press("Escape")
    expect(sidebar).not_to_be_in_viewport()
    expect(toggle).to_have_attribute("aria-expanded", "false")
    expect(toggle).to_be_focused()

    page.get_by_test_id("toggle-team").click()
    expect(page.get_by_test_id("team-panel")).to_be_in_viewport()
    page.keyboard.press("Escape")
    expect(page.get_by_test_id("team-panel")).to_have_count(0)

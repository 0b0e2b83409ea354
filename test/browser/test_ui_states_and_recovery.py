"""Issue 11's defects of the chat UI, each in the browser against the real server: every test here
failed before its fix."""

from __future__ import annotations

import threading

from playwright.sync_api import expect

from modules.statuses import AgentState, CommandStatus
from test.browser.conftest import PHONE
from test.browser.helpers import assistant, send, wait_connected
from test.scripted_llm import match_system, text, tool_calls

MASTER = match_system("You are MasterAgent")
WIDE = {"width": 1400, "height": 900}


def test_messages_queued_behind_a_reply_show_live_and_survive_a_reload(page, ui_server, llm):
    gate = threading.Event()
    llm.script(text("A slow first answer.", wait=gate), text("Both later messages seen."), match=MASTER)
    try:
        send(page, "first question")
        reply = assistant(page)
        expect(reply).to_have_attribute("data-done", "false")
        send(page, "second, while it writes")
        send(page, "third, while it writes")
        row = page.get_by_test_id("agent-row").filter(has_text="MasterAgent")
        expect(row.get_by_test_id("agent-queue")).to_have_text("2 queued")  # live, no reload
        page.reload()
        users = page.get_by_test_id("user-message").get_by_test_id("user-text")
        expect(users).to_have_text(["first question", "second, while it writes", "third, while it writes"])
        expect(page.get_by_test_id("user-message").and_(page.locator("[data-queued=true]"))).to_have_count(2)
    finally:
        gate.set()
    expect(assistant(page).last.get_by_test_id("assistant-text")).to_have_text("Both later messages seen.")
    expect(page.locator("[data-queued=true]")).to_have_count(0)
    expect(page.get_by_test_id("user-message")).to_have_count(3)


def test_stop_with_queued_messages_says_they_start_now(page, ui_server, llm):
    words = " ".join(f"word{i}" for i in range(400))
    llm.script(text(words, chunk_size=6, delay_s=0.02), text("Taking the queued ones."), match=MASTER)
    send(page, "write a long essay")
    expect(assistant(page).get_by_test_id("assistant-text")).to_contain_text("word3")
    send(page, "and then this")
    send(page, "and this too")
    row = page.get_by_test_id("agent-row").filter(has_text="MasterAgent")
    expect(row.get_by_test_id("agent-queue")).to_have_text("2 queued")
    page.get_by_test_id("stop-button").click()
    expect(page.get_by_test_id("status-line")).to_have_text("Stopped. 2 queued messages start now.")
    expect(assistant(page).last.get_by_test_id("assistant-text")).to_have_text("Taking the queued ones.")


def test_a_reply_cut_off_by_stop_reads_as_cut_off_after_reopening(page, ui_server, llm):
    words = " ".join(f"word{i}" for i in range(400))
    llm.script(text(words, chunk_size=6, delay_s=0.02), match=MASTER)
    send(page, "write a long essay")
    reply = assistant(page)
    expect(reply.get_by_test_id("assistant-text")).to_contain_text("word3")
    page.get_by_test_id("stop-button").click()
    expect(page.get_by_test_id("status-line")).to_have_attribute("data-tone", "stopped")
    expect(reply).to_have_attribute("data-interrupted", "true")
    page.reload()
    reply = assistant(page)
    expect(reply).to_have_attribute("data-done", "true")
    expect(reply).to_have_attribute("data-interrupted", "true")
    expect(reply.get_by_test_id("cut-off")).to_be_visible()
    assert "word399" not in reply.get_by_test_id("assistant-text").inner_text()


def test_server_down_says_so_and_shows_nothing_as_running(make_server, open_page, llm):
    server = make_server()
    gate = threading.Event()
    llm.script(text("never finished", wait=gate), match=MASTER)
    page = open_page(server)
    try:
        send(page, "start something")
        expect(page.get_by_test_id("stop-button")).to_be_visible()
        server.kill()
        banner = page.get_by_test_id("connection-error")
        expect(banner).to_have_attribute("data-reason", "unreachable")
        expect(banner).to_contain_text("cannot be reached")
        expect(banner).not_to_contain_text("xhr")
        expect(banner).not_to_contain_text("token")
        expect(page.get_by_test_id("stop-button")).to_have_count(0)
        expect(page.get_by_test_id("agent-state").first).to_have_text("offline")
    finally:
        gate.set()


def test_after_a_restart_a_dead_question_and_command_stop_waiting(make_server, open_page, llm):
    server = make_server()
    llm.script(tool_calls(("run_command", {"command": "sleep 60"})), match=MASTER)
    page = open_page(server)
    send(page, "sleep a while")
    card = page.get_by_test_id("tool-card")
    expect(card).to_have_attribute("data-status", "running")
    server.kill()
    expect(page.get_by_test_id("connection-error")).to_have_attribute("data-reason", "unreachable")
    server.start()
    wait_connected(page)
    # without a reload: the card stops spinning next to the reason, which the timeline says once
    expect(page.get_by_test_id("status-line")).to_contain_text("the server process running this task stopped")
    expect(card).to_have_attribute("data-status", "failed")
    # after a reload the reason stays in sight on the card, not only inside it
    page.reload()
    card = page.get_by_test_id("tool-card")
    expect(card).to_have_attribute("data-status", "failed")
    expect(card.get_by_test_id("tool-error")).to_contain_text("server restarted")


def test_a_question_dropped_by_a_restart_takes_no_answer(make_server, open_page, llm):
    server = make_server()
    llm.script(tool_calls(("ask_user", {"question": "Which seat?", "options": ["Window", "Aisle"]})), match=MASTER)
    page = open_page(server)
    send(page, "book me a seat")
    card = page.get_by_test_id("ask-card")
    expect(card).to_have_attribute("data-answered", "false")
    server.kill()
    expect(page.get_by_test_id("connection-error")).to_have_attribute("data-reason", "unreachable")
    server.start()
    wait_connected(page)
    expect(card).to_have_attribute("data-answered", "true")
    expect(card.get_by_test_id("ask-option")).to_have_count(0)
    expect(card.get_by_test_id("ask-answer")).to_contain_text("Not answered")


def test_a_background_command_shows_it_runs_its_output_and_a_cancel(page, ui_server, llm):
    loop = "for i in $(seq 1 60); do echo tick-$i; sleep 0.5; done"
    llm.script(tool_calls(("run_command", {"command": loop, "run_in_background": True})), text("Started it."),
               text("It was cancelled."), match=MASTER)
    send(page, "run the ticker in the background")
    card = page.get_by_test_id("tool-card")
    expect(card).to_have_attribute("data-status", "background")  # not a check mark at once
    line = card.get_by_test_id("background-command")
    expect(line).to_contain_text("running in the background")
    expect(card.get_by_test_id("background-output")).to_contain_text("tick-2")  # live output
    card.get_by_test_id("cancel-command").click()
    expect(line).to_have_attribute("data-command-status", CommandStatus.CANCELLED)
    expect(card).to_have_attribute("data-status", "failed")
    expect(card.get_by_test_id("cancel-command")).to_have_count(0)
    expect(assistant(page).last.get_by_test_id("assistant-text")).to_have_text("It was cancelled.")


def test_a_send_that_fails_offers_a_retry_and_goes_out_when_back(page, ui_server, llm):
    llm.script(text("Hello there."), text("Got it now."), match=MASTER)
    send(page, "hello")
    expect(assistant(page).get_by_test_id("assistant-text")).to_have_text("Hello there.")
    page.route("**/api/tasks", lambda route: route.abort() if route.request.method == "POST" else route.fallback())
    page.evaluate("window.__agentChat.disconnect()")
    expect(page.get_by_test_id("connection-status")).to_have_attribute("data-state", "disconnected")
    send(page, "sent while offline")
    failed = page.get_by_test_id("user-message").last
    expect(failed.get_by_test_id("send-error")).to_be_visible()
    expect(failed.get_by_test_id("retry-send")).to_be_visible()
    page.unroute("**/api/tasks")
    page.evaluate("window.__agentChat.connect()")
    wait_connected(page)
    # back online, the unsent message goes out by itself, once
    expect(assistant(page).last.get_by_test_id("assistant-text")).to_have_text("Got it now.")
    expect(page.get_by_test_id("send-error")).to_have_count(0)
    users = page.get_by_test_id("user-message").get_by_test_id("user-text")
    expect(users).to_have_text(["hello", "sent while offline"])


def test_an_over_long_message_stays_in_the_composer_with_a_counter(page, ui_server, llm):
    box = page.get_by_test_id("message-input")
    box.fill("x" * 25_000)
    expect(page.get_by_test_id("char-count")).to_have_text("25,000 / 20,000")
    expect(page.get_by_test_id("send-button")).to_be_disabled()
    box.press("Enter")
    expect(box).to_have_value("x" * 25_000)
    expect(page.get_by_test_id("user-message")).to_have_count(0)
    box.fill("short")
    expect(page.get_by_test_id("char-count")).to_have_count(0)


def test_back_and_forward_move_between_conversations(page, ui_server, llm):
    ids = [ui_server.post("/api/conversations", json={"title": t}).json()["conversation_id"] for t in ("Alpha", "Beta")]
    page.reload()
    items = page.get_by_test_id("conversation-item")
    items.filter(has_text="Alpha").click()
    expect(page.get_by_test_id("conversation-title")).to_have_text("Alpha")
    items.filter(has_text="Beta").click()
    expect(page.get_by_test_id("conversation-title")).to_have_text("Beta")
    page.go_back()
    expect(page.get_by_test_id("conversation-title")).to_have_text("Alpha")
    assert page.url.endswith(f"#/c/{ids[0]}")
    page.go_back()
    expect(page.get_by_test_id("welcome")).to_be_visible()
    page.go_forward()
    expect(page.get_by_test_id("conversation-title")).to_have_text("Alpha")


PLAIN_OUTPUT = (
    "The command printed:\n\n```\ntotal 12\ndrwxr-xr-x 2 root root 4096 Dec  1 05:33 .\n"
    "-rw-r--r-- 1 root root  913 Dec  1 05:33 index.html\n```\n\n"
    "and then:\n\n```\nselect from where order by the user\nkey: value\n```\n"
)


def test_plain_command_output_is_not_labelled_as_a_language(page, ui_server, llm):
    llm.script(text(PLAIN_OUTPUT), match=MASTER)
    send(page, "list the files")
    reply = assistant(page)
    expect(reply).to_have_attribute("data-done", "true")
    expect(reply.locator("pre code")).to_have_count(2)
    expect(reply.locator(".code-lang")).to_have_count(0)
    expect(reply.locator("pre code span")).to_have_count(0)


def test_an_answered_question_shows_the_answer_once(page, ui_server, llm):
    llm.script(
        tool_calls(("ask_user", {"question": "Which seat do you prefer?", "options": ["Window", "Aisle"]})),
        text("Booked a window seat."),
        match=MASTER,
    )
    send(page, "book me a seat")
    card = page.get_by_test_id("ask-card")
    card.get_by_test_id("ask-option").filter(has_text="Window").click()
    expect(assistant(page).last.get_by_test_id("assistant-text")).to_have_text("Booked a window seat.")
    for reload in (False, True):
        if reload:
            page.reload()
        expect(card).to_have_attribute("data-answered", "true")
        expect(page.get_by_test_id("user-message").last.get_by_test_id("user-text")).to_have_text("Window")
        expect(card.get_by_test_id("ask-answer")).to_contain_text("Answered")
        expect(card.get_by_test_id("ask-answer")).not_to_contain_text("Window")  # the bubble says it


def test_team_panel_and_history_use_the_same_words_and_no_repeated_name(page, ui_server, llm):
    llm.script(text("Done."), match=MASTER)
    send(page, "hello")
    row = page.get_by_test_id("agent-row").filter(has_text="MasterAgent")
    expect(row).to_have_attribute("data-state", AgentState.COMPLETED)
    expect(row.get_by_test_id("agent-state")).to_have_text("completed")
    expect(row.get_by_test_id("agent-role")).to_have_count(0)  # the role is the name: said once
    row.click()
    side = page.get_by_test_id("agent-history")
    expect(side.get_by_test_id("agent-history-state")).to_have_text("completed")
    expect(side.locator(".panel-head")).not_to_contain_text("MasterAgent ·")


def test_an_agent_history_floats_over_the_chat_instead_of_squeezing_it(open_page, ui_server, llm):
    llm.script(text("Done."), match=MASTER)
    page = open_page(ui_server, viewport=WIDE)
    send(page, "hello")
    expect(assistant(page)).to_have_attribute("data-done", "true")
    before = page.get_by_test_id("chat").bounding_box()["width"]
    page.get_by_test_id("agent-row").first.click()
    expect(page.get_by_test_id("agent-history")).to_be_visible()
    after = page.get_by_test_id("chat").bounding_box()["width"]
    assert after == before and after > 700, (before, after)


def test_the_composer_has_the_focus_when_the_page_opens(page, ui_server, llm):
    wait_connected(page)
    expect(page.get_by_test_id("message-input")).to_be_focused()


def test_the_demo_banner_is_one_line_on_a_phone_and_can_be_dismissed(make_server, open_page, llm):
    server = make_server(env={"OPENAI_API_KEY": "", "DEMO_CHUNK_DELAY_S": "0"})
    page = open_page(server, viewport=PHONE)
    banner = page.get_by_test_id("demo-banner")
    expect(banner).to_be_visible()
    assert banner.bounding_box()["height"] < 44
    page.get_by_test_id("dismiss-demo-banner").click()
    expect(banner).to_have_count(0)
    page.reload()
    expect(page.get_by_test_id("welcome")).to_be_visible()
    expect(page.get_by_test_id("demo-banner")).to_have_count(0)

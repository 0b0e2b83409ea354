"""The chat speaks to the user: notices without internal ids and with their Markdown rendered, tool arguments as
fields, the route in a details view, one wording for how a question ended, and a tab title that says work finished
while the tab was hidden."""

from __future__ import annotations

from playwright.sync_api import expect

from modules.event_catalogue import (
    AiMessageStartEvent,
    AskUserEvent,
    ErrorEvent,
    TaskCompleteEvent,
    TextChunkEvent,
    TextEndEvent,
    UserMessageEvent,
)
from modules.statuses import MessageSource, Route, Visibility
from test.browser.helpers import assistant, inject, open_synthetic_conversation, send
from test.scripted_llm import text, tool_calls

COMMAND_NOTICE = ("[Background command d21b8885 succeeded, exit code 0, 1.4 s] `make build`\n"
                  "Output (tail):\ncompiling\nbuild ok")  # fmt: skip
QUESTION_NOTICE = ("[Question q_543052894f92 from InfoAgent_1] Which **year** do you mean?\n"
                   "(Reply with your answer tool, question_id=q_543052894f92.)")  # fmt: skip
SUB_AGENT_NOTICE = "[Sub-agent InfoAgent_1 succeeded in 2.0 s]\nResult:\nAll **12** tests pass.\n\n- unit\n- browser"


def _notice(message_id: str, message: str, source: str, **meta: str) -> dict:
    return {"message": message, "message_id": message_id, "source": source, "visibility": Visibility.COMPACT,
            "starts_work": False, "metadata": meta}  # fmt: skip


def test_notices_read_as_markdown_without_internal_ids(open_page, ui_server, llm):
    page, cid, master = open_synthetic_conversation(open_page, ui_server, "plain notices")
    inject(page, cid, master, "task-n", [
        (0, UserMessageEvent.TYPE, _notice("n-cmd", COMMAND_NOTICE, MessageSource.BACKGROUND_COMMAND)),
        (1, UserMessageEvent.TYPE, _notice("n-ask", QUESTION_NOTICE, "agent", from_agent="InfoAgent_1",
                                           message_type="ask")),
        (2, UserMessageEvent.TYPE, _notice("n-sub", SUB_AGENT_NOTICE, MessageSource.SUB_AGENT,
                                           sub_agent_notice="true")),
    ])  # fmt: skip
    notices = page.get_by_test_id("notice")
    expect(notices).to_have_count(3)
    chat = page.get_by_test_id("timeline")
    for internal in ("d21b8885", "q_543052894f92", "question_id", "[Question", "**"):
        expect(chat).not_to_contain_text(internal)
    cmd, ask, sub = notices.nth(0), notices.nth(1), notices.nth(2)
    expect(cmd).to_contain_text("Command succeeded")
    expect(cmd.get_by_test_id("notice-text").locator("code").first).to_have_text("make build")
    expect(ask).to_contain_text("InfoAgent_1 asks")
    expect(ask.get_by_test_id("notice-text").locator("strong")).to_have_text("year")
    expect(sub.get_by_test_id("notice-text").locator("strong")).to_have_text("12")
    sub.get_by_role("button").click()
    expect(sub.get_by_test_id("notice-body").locator("li")).to_have_text(["unit", "browser"])
    cmd.get_by_role("button").click()
    expect(cmd.get_by_test_id("notice-body").locator("pre")).to_contain_text("compiling\nbuild ok")


def test_tool_arguments_show_as_fields_with_the_raw_json_behind_a_toggle(page, llm):
    llm.script(tool_calls(("run_command", {"command": "echo fields", "run_in_background": False}), text="Running."))
    llm.script(text("It printed fields."))
    send(page, "echo fields please")
    card = page.get_by_test_id("tool-card")
    expect(card).to_have_attribute("data-status", "done")
    card.get_by_test_id("tool-toggle").click()
    fields = card.get_by_test_id("tool-fields")
    expect(fields.locator("dt")).to_have_text(["Command", "Run in background"])
    expect(fields.locator("dd")).to_have_text(["echo fields", "no"])
    expect(card.get_by_test_id("tool-arguments")).to_have_count(0)
    card.get_by_test_id("tool-raw-toggle").click()
    expect(card.get_by_test_id("tool-arguments")).to_contain_text('"run_in_background": false')
    expect(card.get_by_test_id("tool-fields")).to_have_count(0)


def test_the_route_is_a_detail_not_a_badge_on_every_message(page, llm):
    llm.script(text("Hello."))
    send(page, "hello there")
    expect(assistant(page).last).to_have_attribute("data-done", "true")
    user = page.get_by_test_id("user-message")
    badge = user.get_by_test_id("route-badge")
    expect(badge).to_be_hidden()
    user.get_by_test_id("message-details-toggle").click()
    expect(badge).to_be_visible()
    expect(badge).to_have_attribute("data-route", Route.PIPELINE)


def test_a_question_that_got_no_answer_says_so_in_the_one_wording(open_page, ui_server, llm):
    page, cid, master = open_synthetic_conversation(open_page, ui_server, "question outcomes")
    inject(page, cid, master, "task-q", [
        (0, AskUserEvent.TYPE, {"question_id": "q-1", "question": "Which seat?", "options": ["Window", "Aisle"]}),
        (1, ErrorEvent.TYPE, {"message": "the model is unreachable", "code": "model_error"}),
    ])  # fmt: skip
    answer = page.get_by_test_id("ask-card").get_by_test_id("ask-answer")
    expect(answer).to_have_attribute("data-outcome", "not-answered")
    expect(answer).to_have_text("– Not answered: the model is unreachable")


HIDDEN_TAB = """() => { window.__hidden = false;
  Object.defineProperty(document, 'hidden', { configurable: true, get: () => window.__hidden });
  Object.defineProperty(document, 'visibilityState', { configurable: true,
    get: () => (window.__hidden ? 'hidden' : 'visible') }); }"""
SET_HIDDEN = "(h) => { window.__hidden = h; document.dispatchEvent(new Event('visibilitychange')); }"


def test_the_tab_title_says_work_finished_while_the_tab_was_hidden(open_page, ui_server, llm):
    page, cid, master = open_synthetic_conversation(open_page, ui_server, "tab title")
    page.evaluate(HIDDEN_TAB)
    expect(page).to_have_title("tab title · Agent team chat")
    inject(page, cid, master, "task-t", [
        (0, AiMessageStartEvent.TYPE, {"message_id": "r-t", "display_name": "MasterAgent"}),
        (1, TextChunkEvent.TYPE, {"message_id": "r-t", "content": "working"}),
    ])  # fmt: skip
    expect(page.get_by_test_id("stop-button")).to_be_visible()
    page.evaluate(SET_HIDDEN, True)
    inject(page, cid, master, "task-t", [(2, TextEndEvent.TYPE, {"message_id": "r-t", "content": "working"}),
                                         (3, TaskCompleteEvent.TYPE, {})])  # fmt: skip
    expect(page).to_have_title("✓ Done · tab title · Agent team chat")
    page.evaluate(SET_HIDDEN, False)
    expect(page).to_have_title("tab title · Agent team chat")

    # a sub-agent's report while hidden marks it too; while the tab is shown, nothing changes
    inject(page, cid, master, "task-u", [(0, UserMessageEvent.TYPE, _notice("n-1", SUB_AGENT_NOTICE,
                                                                            MessageSource.SUB_AGENT))])
    expect(page.get_by_test_id("notice")).to_have_count(1)
    expect(page).to_have_title("tab title · Agent team chat")
    page.evaluate(SET_HIDDEN, True)
    inject(page, cid, master, "task-u", [(1, UserMessageEvent.TYPE, _notice("n-2", SUB_AGENT_NOTICE,
                                                                            MessageSource.SUB_AGENT))])
    expect(page).to_have_title("✓ Done · tab title · Agent team chat")

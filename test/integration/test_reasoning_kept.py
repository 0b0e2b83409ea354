"""A reply's thinking and a cut-off reply, through the real server (README, "Providers"): the reasoning is
stored with the assistant message and sent back as `reasoning_content` where DeepSeek's thinking mode
requires it, never mixed into the reply, never sent for a provider that did not think; `finish_reason:
"length"` is marked truncated in `text_end` and the history, `"content_filter"` filtered; a reply that failed keeps
the thinking shown before it."""

from __future__ import annotations

from modules.event_catalogue import ReasoningChunkEvent, TextChunkEvent, TextEndEvent
from modules.statuses import TaskStatus
from test.provider_replies import cut_at_length, deepseek_thinking, openrouter_error
from test.scripted_llm import dynamic, error, text, tool_calls

THOUGHT = "The user wants the date; a command tells it."


def deepseek_requires_reasoning(then):
    """DeepSeek's thinking mode: a request whose assistant message with tool calls (of the current turn)
    lacks its `reasoning_content` is refused with 400."""

    def build(body: dict):
        for i, m in enumerate(body["messages"]):
            if m["role"] == "assistant" and m.get("tool_calls") and not m.get("reasoning_content"):
                return error(400, f"Missing `reasoning_content` field in the assistant message at message "
                                  f"index {i}.")
        return then

    return dynamic(build)


def messages_of(server, cid: str) -> list[dict]:
    return server.get(f"/api/conversations/{cid}/messages").json()["data"]


def test_deepseek_thinking_with_a_tool_call_gets_its_reasoning_back_and_goes_on(server, llm):
    llm.script(deepseek_thinking(THOUGHT, calls=(("ds-1", "run_command", {"command": "echo 2026-12-02"}),)))
    llm.script(deepseek_requires_reasoning(deepseek_thinking("It printed the date.", "Today is 2026-12-02.")))

    sent = server.send("what is the date?")
    task = server.wait_task(sent["task_id"])

    assert task["status"] == TaskStatus.SUCCEEDED, task["events"][-1]
    follow_up = llm.wait_for_requests(2)[1].body["messages"]
    [with_calls] = [m for m in follow_up if m["role"] == "assistant"]
    assert with_calls["reasoning_content"] == THOUGHT
    thinking = "".join(e["data"]["content"] for e in task["events"] if e["type"] == ReasoningChunkEvent.TYPE)
    assert thinking == THOUGHT + "It printed the date."  # streamed as it came, apart from the text
    assert "".join(e["data"]["content"] for e in task["events"] if e["type"] == TextChunkEvent.TYPE) == \
        "Today is 2026-12-02."
    ends = [e["data"] for e in task["events"] if e["type"] == TextEndEvent.TYPE]
    assert ends[0]["reasoning"] == THOUGHT and ends[-1] == {**ends[-1], "content": "Today is 2026-12-02.",
                                                           "reasoning": "It printed the date."}
    stored = [m for m in messages_of(server, sent["conversation_id"]) if m["role"] == "assistant"]
    assert [m["metadata"].get("reasoning") for m in stored] == [THOUGHT, "It printed the date."]
    assert all(THOUGHT not in (m["content"] or "") for m in stored)

    llm.script(text("Tomorrow."))
    later = server.send("and tomorrow?", sent["conversation_id"])
    assert server.wait_task(later["task_id"])["status"] == TaskStatus.SUCCEEDED
    next_turn = llm.agent_requests[-1].body["messages"]
    assert not any("reasoning_content" in m for m in next_turn)  # a previous turn's thinking stays home


def test_a_provider_that_does_not_think_is_sent_no_reasoning(server, llm):
    llm.script(tool_calls(("run_command", {"command": "echo hi"})))
    llm.script(text("It said hi."))
    sent = server.send("say hi")
    assert server.wait_task(sent["task_id"])["status"] == TaskStatus.SUCCEEDED
    follow_up = llm.wait_for_requests(2)[1].body["messages"]
    assert not any("reasoning_content" in m for m in follow_up)
    assert all("reasoning" not in m["metadata"] for m in messages_of(server, sent["conversation_id"]))


def test_a_reply_cut_at_the_output_limit_is_marked_truncated(server, llm):
    llm.script(cut_at_length("The list goes on: one, two, thr"))
    sent = server.send("list everything")
    task = server.wait_task(sent["task_id"])
    assert task["status"] == TaskStatus.SUCCEEDED
    [end] = [e["data"] for e in task["events"] if e["type"] == TextEndEvent.TYPE]
    assert end["truncated"] is True and end["content"] == "The list goes on: one, two, thr"
    [reply] = [m for m in messages_of(server, sent["conversation_id"]) if m["role"] == "assistant"]
    assert reply["metadata"]["truncated"] is True


def test_a_reply_the_content_filter_stopped_is_marked_filtered(server, llm):
    for message, content in (("something the filter blocks partly", "Sure, the"), ("something it blocks", "")):
        llm.script(cut_at_length(content, "content_filter"))
        sent = server.send(message)
        task = server.wait_task(sent["task_id"])
        assert task["status"] == TaskStatus.SUCCEEDED
        [end] = [e["data"] for e in task["events"] if e["type"] == TextEndEvent.TYPE]
        assert (end["filtered"], end["content"], "truncated" in end) == (True, content, False)
        replies = [m for m in messages_of(server, sent["conversation_id"]) if m["role"] == "assistant"]
        # An empty reply is not stored (as any empty reply): its `text_end` carries the mark.
        assert [(m["content"], m["metadata"]["filtered"]) for m in replies] == ([(content, True)] if content else [])


def test_a_reply_that_failed_after_its_thinking_keeps_the_thinking(server, llm):
    for text_before in ("Half an ans", ""):
        # Not retried (the thinking was shown): a second request would get the default reply and succeed.
        llm.script(openrouter_error(502, "Provider disconnected", reasoning="Weighing it up.", before=text_before))
        sent = server.send(f"think about it{text_before}")
        task = server.wait_task(sent["task_id"])
        assert task["status"] == TaskStatus.FAILED
        [end] = [e["data"] for e in task["events"] if e["type"] == TextEndEvent.TYPE]
        assert (end["partial"], end["content"], end["reasoning"]) == (True, text_before, "Weighing it up.")
        replies = [m for m in messages_of(server, sent["conversation_id"]) if m["role"] == "assistant"]
        # Thinking alone is not a stored reply (an empty reply is not stored): its `text_end` ends it in the chat.
        assert [(m["content"], m["metadata"]["reasoning"]) for m in replies] == (
            [(text_before, "Weighing it up.")] if text_before else [])

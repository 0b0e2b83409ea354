"""The demo model's example phrases: each answers with the tool call of its mechanism (unit level; the
integration test test/integration/test_demo_examples.py runs them through the server)."""

from __future__ import annotations

import json

import pytest

from modules.llm import DemoChatModel
from modules.llm.demo_model import (
    EXAMPLE_ASK_USER,
    EXAMPLE_BACKGROUND_COMMAND,
    EXAMPLE_SUB_AGENT,
    EXAMPLE_SUB_AGENT_QUESTION,
    EXAMPLES,
)

pytestmark = pytest.mark.timeout(30)

MASTER_TOOLS = ["run_command", "create_sub_agent", "send_message_to_sub_agent", "answer_sub_agent_question",
                "terminate_sub_agent", "ask_user"]
SUB_TOOLS = ["run_command", "ask_master", "ask_other_agent", "answer_other_agent", "ask_user"]


def reply(said: str, tools: list[str], system: str = "You are MasterAgent (MasterAgent).") -> tuple[str, list]:
    defs = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in tools]
    out = DemoChatModel(chunk_delay_s=0).stream_chat(
        messages=[{"role": "system", "content": system}, {"role": "user", "content": said}], tools=defs)
    return out.content, [(c.name, json.loads(c.arguments)) for c in out.tool_calls]


def test_background_command():
    _, calls = reply(EXAMPLE_BACKGROUND_COMMAND, MASTER_TOOLS)
    assert calls == [("run_command", {"command": "sleep 3; echo background work done", "run_in_background": True})]


def test_background_sub_agent_and_its_research():
    _, calls = reply(EXAMPLE_SUB_AGENT, MASTER_TOOLS)
    (name, args), = calls
    assert name == "create_sub_agent" and args["role"] == "InfoAgent" and args["run_in_background"] is True
    _, sub_calls = reply(args["task"], SUB_TOOLS, "You are InfoAgent_1 (InfoAgent).")
    assert sub_calls[0][0] == "run_command"


def test_ask_user():
    _, calls = reply(EXAMPLE_ASK_USER, MASTER_TOOLS)
    assert calls == [("ask_user", {"question": "Which city do you prefer?", "options": ["Lisbon", "Porto"]})]


def test_sub_agent_question_round_trip():
    _, calls = reply(EXAMPLE_SUB_AGENT_QUESTION, MASTER_TOOLS)
    task = calls[0][1]["task"]
    _, sub_calls = reply(task, SUB_TOOLS, "You are InfoAgent_1 (InfoAgent).")
    assert sub_calls[0][0] == "ask_master"
    question = ("[Question q_1234 from InfoAgent_1] Which city should I research: Lisbon or Porto?\n"
                "(Reply with your answer tool, question_id=q_1234.)")
    _, answer = reply(question, MASTER_TOOLS)
    assert answer == [("answer_sub_agent_question", {"question_id": "q_1234", "answer": "Lisbon"})]


def test_notices_are_reported():
    text, calls = reply("[Sub-agent InfoAgent_1 completed in 2.1 s]\nResult:\nBelem Tower", MASTER_TOOLS)
    assert calls == [] and text.startswith("InfoAgent_1 reported back (completed)") and "Belem Tower" in text
    text, _ = reply("[Background command 1234abcd completed, exit code 0, 3.0 s] `sleep 3; echo hi`\n"
                    "Output (tail):\nhi\n", MASTER_TOOLS)
    assert "`sleep 3; echo hi` has completed" in text and "hi" in text


def test_a_wave_of_notices_is_reported_whole_in_one_reply():
    """The notification pool's follow-up: the earlier notices are in the history, the last one starts the turn."""
    history = [{"role": "system", "content": "You are MasterAgent."},
               {"role": "user", "content": "[Sub-agent InfoAgent_1 completed in 2.1 s]\nResult:\nBelem Tower"},
               {"role": "assistant", "content": "InfoAgent_1 reported back (completed):\n\nBelem Tower"},
               {"role": "user", "content": "[Sub-agent InfoAgent_2 succeeded in 0.1 s]\nResult:\nLisbon it is"},
               {"role": "user", "content": "[Background command 1234abcd succeeded, exit code 0, 3.3 s] `sleep 3`\n"
                                           "(no output)"}]
    text = DemoChatModel(chunk_delay_s=0).stream_chat(messages=history, tools=[]).content
    assert text.startswith("InfoAgent_2 reported back (succeeded):\n\nLisbon it is\n\nThe background command "
                           "`sleep 3` has succeeded.") and "Belem Tower" not in text


def test_suggestions_offer_the_other_examples():
    system = "You suggest what the user may want to say next, after the assistant's reply."
    text, _ = reply(f"User said: {EXAMPLE_ASK_USER}\n\nAssistant replied: ok", [], system)
    questions = json.loads(text)["questions"]
    assert questions and EXAMPLE_ASK_USER not in questions and set(questions) <= set(EXAMPLES)


def test_routing_stage_sends_examples_to_the_master():
    system = "You are RoutingAgent. Do two things in one answer. Agents:\n- InfoAgent: policies"
    text, _ = reply(f"Recent conversation:\n\n\nLatest message: {EXAMPLE_SUB_AGENT}", [], system)
    assert json.loads(text) == {"query": EXAMPLE_SUB_AGENT, "agent": "MasterAgent"}

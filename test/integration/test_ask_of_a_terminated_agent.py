"""A blocking ask of an agent that is then terminated: its queue, the question with it, is discarded, so no answer
can come; the asker's wait ends then, saying why, instead of holding it `waiting` until ASK_TIMEOUT_S (as a
blocking create_sub_agent's wait ends when its sub-agent is terminated)."""

from __future__ import annotations

import json
import threading
import time

from modules.statuses import AgentState
from test.conftest import wait_until
from test.integration.helpers import MASTER, history, sub
from test.scripted_llm import text, tool_calls


def test_an_ask_of_an_agent_terminated_before_it_answered_ends_at_once(make_server, llm):
    server = make_server(env={"ASK_TIMEOUT_S": "60"})
    hold = threading.Event()
    llm.script(tool_calls(("create_sub_agent", {"role": "InfoAgent", "task": "look up the rules"}),
                          ("create_sub_agent", {"role": "InfoAgent", "task": "look up the prices"})), match=MASTER)
    llm.set_default(text("noted."))
    llm.script(text("still looking", wait=hold), match=sub(2))
    llm.script(tool_calls(("ask_other_agent", {"target_display_name": "InfoAgent_2", "question": "Which prices?"})),
               text("I could not ask."), match=sub(1))
    sent = server.send("research the trip")
    cid = sent["conversation_id"]

    def agent(name):
        found = [a for a in server.get(f"/api/conversations/{cid}/agents").json()["data"]
                 if a["display_name"] == name]
        return found[0] if found else None

    asker = wait_until(lambda: (a := agent("InfoAgent_1")) and a["state"] == AgentState.WAITING and a,
                       what="InfoAgent_1 waiting for its answer")
    asked = agent("InfoAgent_2")
    assert server.post(f"/api/sub_agents/{asked['agent_id']}/terminate").status_code == 200
    started = time.monotonic()
    wait_until(lambda: agent("InfoAgent_1")["state"] != AgentState.WAITING, timeout=20,
               what="the ask of a terminated agent ended")
    assert time.monotonic() - started < 10, "the ask waited for its timeout"
    hold.set()

    def ask_result():
        tools = [m for m in history(server, cid, asker["display_name"]) if m["role"] == "tool"]
        return tools and json.loads(tools[0]["content"])

    result = wait_until(ask_result, what="the ask's result")
    assert result["success"] is False and "InfoAgent_2 was terminated" in result["error"]

"""What the router's integration tests share: matchers, readers of the server's state, the team's script."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable

from modules.event_catalogue import AgentStateEvent, ToolResultEvent
from modules.statuses import AgentState, TaskStatus
from test.conftest import wait_until
from test.scripted_llm import dynamic, match_system, text, tool_calls

MASTER = match_system("You are MasterAgent")
QUESTION = re.compile(r"\[Question (q_[0-9a-f]{12}) from ([^\]]+)\] ([^\n]*)")
QID = re.compile(r"q_[0-9a-f]{12}")


def sub(n: int, role: str = "InfoAgent"):
    return match_system(f"You are {role}_{n} ")


def all_of(*matches):
    return lambda body: all(m(body) for m in matches)


def last_user_contains(substr: str):
    def match(body: dict) -> bool:
        users = [m for m in body.get("messages", []) if m.get("role") == "user"]
        return bool(users) and substr in (users[-1].get("content") or "")
    return match


# -- reading the server and the model's requests --------------------------------------
def agents(server, cid: str) -> dict[str, dict]:
    return {a["display_name"]: a for a in server.get(f"/api/conversations/{cid}/agents").json()["data"]}


def agent_is(server, cid: str, name: str, state: str | None = None, pending: int | None = None) -> bool:
    """`name` exists, and is in `state` and has `pending` queued messages when those are given."""
    agent = agents(server, cid).get(name)
    return agent is not None and state in (None, agent["state"]) and pending in (None, agent["pending_count"])


def agent_tasks(server, cid: str, name: str) -> list[dict]:
    agent = agents(server, cid).get(name)
    if agent is None:
        return []
    agent_id = agent["agent_id"]
    return [t for t in server.get(f"/api/tasks?conversation_id={cid}").json()["data"] if t["agent_id"] == agent_id]


def wait_tasks(server, cid: str, name: str, n: int, timeout: float = 15) -> list[dict]:
    """Wait until `name` has `n` tasks and all of them are finished; the finished tasks with events."""
    tasks = wait_until(lambda: (t := agent_tasks(server, cid, name)) and len(t) >= n and t, timeout,
                       f"{name} to have {n} tasks")
    assert len(tasks) == n, f"{name} has {len(tasks)} tasks, expected {n}"
    return [server.wait_task(t["task_id"], timeout) for t in tasks]


def history(server, cid: str, agent: str | None = None) -> list[dict]:
    path = f"/api/conversations/{cid}/messages" + (f"?agent={agent}" if agent else "")
    return server.get(path).json()["data"]


def requests_of(llm, match) -> list[list[dict]]:
    """The messages of every model request that `match` accepts, in arrival order."""
    return [r.body["messages"] for r in llm.requests if match(r.body)]


def tool_results(task: dict, name: str) -> list[dict]:
    return [json.loads(e["data"]["result"]) for e in task["events"]
            if e["type"] == ToolResultEvent.TYPE and e["data"]["name"] == name]


def states_of(task: dict) -> list[str]:
    return [e["data"]["state"] for e in task["events"] if e["type"] == AgentStateEvent.TYPE]


def contents(messages: list[dict], role: str = "user") -> list[str]:
    return [m.get("content") or "" for m in messages if m["role"] == role]


def assert_tool_calls_closed(messages: list[dict]) -> None:
    """What the provider checks: each assistant tool_calls message is followed by exactly its results."""
    i = 0
    while i < len(messages):
        m = messages[i]
        assert m["role"] != "tool", f"a tool result without its call at {i}: {m}"
        if m["role"] == "assistant" and m.get("tool_calls"):
            ids = [c["id"] for c in m["tool_calls"]]
            block = messages[i + 1:i + 1 + len(ids)]
            assert [b["role"] for b in block] == ["tool"] * len(ids), f"open tool calls at {i}: {messages}"
            assert sorted(b["tool_call_id"] for b in block) == sorted(ids)
            i += 1 + len(ids)
        else:
            i += 1


def idle_everywhere(server, cid: str) -> bool:
    listed = agents(server, cid).values()
    tasks = server.get(f"/api/tasks?conversation_id={cid}").json()["data"]
    return (all(a["state"] in (AgentState.IDLE, AgentState.COMPLETED) and a["pending_count"] == 0 for a in listed)
            and all(t["status"] in (TaskStatus.SUCCEEDED, TaskStatus.FAILED, TaskStatus.STOPPED) for t in tasks))


# -- a master that answers the questions it is asked --------------------------------
def unanswered_questions(body: dict) -> list[tuple[str, str, str]]:
    """(question_id, asker, question) of every question in the request not answered by a tool call yet."""
    asked = [QUESTION.search(m.get("content") or "") for m in body["messages"] if m["role"] == "user"]
    answered = {json.loads(c["function"]["arguments"]).get("question_id")
                for m in body["messages"] if m["role"] == "assistant" for c in m.get("tool_calls") or []}
    return [q.groups() for q in asked if q and q.group(1) not in answered]


def answering(answer: Callable[[str, str], str], tool: str = "answer_sub_agent_question",
              hold: threading.Event | None = None, otherwise: str = "ok"):
    """A dynamic step: answer every open question of the request with `answer(asker, question)`."""
    def build(body: dict):
        open_questions = unanswered_questions(body)
        if not open_questions:
            return text(otherwise)
        return tool_calls(*[(tool, {"question_id": qid, "answer": answer(asker, question)})
                            for qid, asker, question in open_questions], wait=hold)
    return dynamic(build)


def script_team(llm, *tasks: str, role: str = "InfoAgent") -> None:
    """Script first: the master's first model call starts one background sub-agent per task."""
    llm.script(tool_calls(*[("create_sub_agent", {"role": role, "task": t}) for t in tasks]), match=MASTER)


def start_team(server) -> tuple[str, str]:
    """The user's first message, which the master answers with `script_team`'s tool round."""
    sent = server.send("start the team")
    return sent["conversation_id"], sent["task_id"]


def all_tool_results(server, cid: str, name: str, tool: str) -> list[dict]:
    """`tool`'s results over every turn of agent `name`, once the whole conversation is at rest."""
    wait_until(lambda: idle_everywhere(server, cid), what="the conversation at rest")
    return [r for t in agent_tasks(server, cid, name) for r in tool_results(server.wait_task(t["task_id"]), tool)]

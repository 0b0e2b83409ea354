"""What every fault case checks once the fault is over, and a few ways to poke the server during one."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import requests

from modules.event_catalogue import TextEndEvent
from modules.statuses import AgentState, TaskStatus
from test.conftest import FINAL_STATUSES, ServerProcess, wait_until
from test.scripted_llm import ScriptedLLMServer, match_last_user, match_system, text

MASTER = match_system("You are MasterAgent")

RECOVERY_S = 30  # every task final and every agent out of `running` within this of the fault's end


@dataclass(frozen=True)
class Sent:
    """A send's answer: a 202 completed with its route (it follows the acknowledgement), or the refusal."""

    status_code: int
    body: dict[str, Any]

    def json(self) -> dict[str, Any]:
        return self.body


@dataclass
class Ledger:
    """The messages the server accepted (202) and those it refused (503) during a case."""

    accepted: dict[str, str] = field(default_factory=dict)  # message_id -> content
    refused: list[str] = field(default_factory=list)  # contents

    def send(self, server: ServerProcess, message: str, conversation_id: str, *,
             timeout: float = 10) -> Sent:
        """Send; a 202 is recorded as accepted, a 503 must say `database_unavailable`. Bounded: never a hang."""
        started = time.monotonic()
        res = requests.post(server.url + "/api/tasks", json={"message": message, "conversation_id": conversation_id},
                            timeout=timeout)
        elapsed = time.monotonic() - started
        if res.status_code == 202:
            self.accepted[res.json()["message_id"]] = message
        else:
            assert res.status_code == 503, res.text
            assert res.json()["code"] == "database_unavailable", res.text
            self.refused.append(message)
        assert elapsed < timeout, f"the send took {elapsed:.1f} s"
        return Sent(res.status_code, server.routed(res.json()) if res.status_code == 202 else res.json())


def wait_back(server: ServerProcess) -> None:
    """Until the server says the database is back: its API stops answering 503."""
    wait_until(lambda: requests.get(server.url + "/api/conversations", timeout=10).status_code != 503, RECOVERY_S,
               what="the database back")


def healthz(server: ServerProcess) -> tuple[int, dict[str, Any], float]:
    started = time.monotonic()
    res = requests.get(server.url + "/healthz", timeout=10)
    return res.status_code, res.json(), time.monotonic() - started


def assert_reports_outage(server: ServerProcess) -> None:
    """/healthz says so after its 0.8 s probe, not after the database's own timeout (DB_TIMEOUT_S, 2 s in these
    tests); the bound leaves a second for a busy machine."""
    status, body, elapsed = healthz(server)
    assert (status, body["database"]) == (503, "unavailable"), body
    assert elapsed < 1.8, f"/healthz took {elapsed:.2f} s"


def _snapshot(server: ServerProcess, cid: str) -> dict[str, Any]:
    agents = server.get(f"/api/conversations/{cid}/agents").json()["data"]
    tasks = server.get(f"/api/tasks?conversation_id={cid}").json()["data"]
    histories = {a["agent_id"]: server.get(f"/api/conversations/{cid}/messages?agent={a['agent_id']}").json()["data"]
                 for a in agents}
    return {"agents": agents, "tasks": tasks, "histories": histories}


def _problems(snap: dict[str, Any], ledger: Ledger) -> list[str]:
    problems = [f"task {t['task_id']} is {t['status']}" for t in snap["tasks"] if t["status"] not in FINAL_STATUSES]
    problems += [f"agent {a['display_name']} is {a['state']}" for a in snap["agents"]
                 if a["state"] in (AgentState.RUNNING, AgentState.WAITING)]
    everything = [m for msgs in snap["histories"].values() for m in msgs]
    for message_id in ledger.accepted:
        copies = sum(1 for m in everything if m["message_id"] == message_id)
        if copies != 1:
            problems.append(f"accepted message {message_id} is in the histories {copies} times")
    for content in ledger.refused:
        if any(m["role"] == "user" and m["content"] == content for m in everything):
            problems.append(f"refused message {content!r} was stored")
    for agent_id, msgs in snap["histories"].items():
        results = {m["tool_call_id"] for m in msgs if m["role"] == "tool"}
        for m in msgs:
            for call in m["tool_calls"] or []:
                if call["id"] not in results:
                    problems.append(f"tool call {call['id']} of agent {agent_id} has no result")
    return problems


def assert_settled(server: ServerProcess, cid: str, ledger: Ledger, *, timeout: float = RECOVERY_S) -> dict:
    """Every task final, no agent running or waiting, every accepted message stored once and every refused one
    not at all, every tool call with its result; waited for up to `timeout`."""
    last: list[str] = []

    def settled():
        nonlocal last
        try:
            snap = _snapshot(server, cid)
        except (requests.RequestException, KeyError, ValueError) as exc:  # e.g. a 503 just before it is back
            last = [repr(exc)]
            return None
        last = _problems(snap, ledger)
        return snap if not last else None

    try:
        return wait_until(settled, timeout, what="a settled conversation")
    except TimeoutError:
        raise AssertionError(f"not settled within {timeout} s: {last}\n{server.log_text()}") from None


def assert_answers_next(server: ServerProcess, llm: ScriptedLLMServer, cid: str, ledger: Ledger) -> None:
    """The conversation goes on: the next message gets its answer."""
    asked = match_last_user("still there?")
    llm.script(text("yes, still here"), match=lambda body: MASTER(body) and asked(body))
    res = ledger.send(server, "are you still there?", cid)
    assert res.status_code == 202, res.text
    task = server.wait_task(res.json()["task_id"], timeout=RECOVERY_S)
    assert task["status"] == TaskStatus.SUCCEEDED, task
    ends = [e["data"]["content"] for e in task["events"] if e["type"] == TextEndEvent.TYPE]
    assert ends and ends[-1] == "yes, still here", ends
    assert_settled(server, cid, ledger)

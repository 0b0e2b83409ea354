"""Done-when of the context window (README, "Long conversations"): 200 turns, with sub-agents whose commands
print a lot, against a window of 4,000 tokens: every turn succeeds, every request holds the latest messages
and fits the window, and the instruction of turn 1 is in what the agent sees at turn 200."""

from __future__ import annotations

import re
import threading

import pytest

from modules.event_catalogue import ContextCompactedEvent
from modules.statuses import TaskStatus
from test.scripted_llm import text, tool_calls
from test.scripted_steps import Step, text_of
from test.windowed_model import WindowedModel, everything_seen

pytestmark = pytest.mark.timeout(900)

WINDOW = 4000
TURNS = 200
RULE = "INSTRUCTION: sign every reply with -- Ahab"
SUB_RULE = "INSTRUCTION: print the logs as CSV"
LOUD = "yes 'alpha,beta,gamma,delta,epsilon' | head -n 3000"  # 8,000 characters of its tail reach the model
COMMANDS_PER_SUB_AGENT = 6
HELPER_EVERY = 20


def calls_answered(body: dict) -> bool:
    """Every tool result follows the assistant message that made its call, and every call has its result."""
    open_calls: set[str] = set()
    for m in body["messages"]:
        if m["role"] == "assistant":
            if open_calls:
                return False
            open_calls = {c["id"] for c in m.get("tool_calls") or []}
        elif m["role"] == "tool":
            if m["tool_call_id"] not in open_calls:
                return False
            open_calls.discard(m["tool_call_id"])
        elif open_calls:
            return False
    return not open_calls


class Team:
    """The scripted agents: the master answers each turn, every HELPER_EVERY-th by a blocking sub-agent
    that runs COMMANDS_PER_SUB_AGENT loud commands; each request is checked as it arrives."""

    def __init__(self) -> None:
        self.turn = 0
        self.lock = threading.Lock()
        self.commands: dict[str, int] = {}
        self.violations: list[tuple[int, str]] = []
        self.master_requests = 0
        self.sub_agent_requests = 0

    def fail(self, what: str) -> None:
        self.violations.append((self.turn, what))

    def __call__(self, body: dict) -> Step:
        system = text_of(body["messages"][0])
        seen = everything_seen(body)
        last = body["messages"][-1]
        if not calls_answered(body):
            self.fail("a tool call was separated from its result")
        if system.startswith("You are MasterAgent"):
            return self.master(body, seen, last)
        return self.sub_agent(system, seen, last)

    def master(self, body: dict, seen: str, last: dict) -> Step:
        with self.lock:
            self.master_requests += 1
        if RULE not in seen:
            self.fail("the master lost the instruction of turn 1")
        if last["role"] == "user":
            if not text_of(last).startswith(f"turn {self.turn}:"):
                self.fail(f"the master's request ends with {text_of(last)[:30]!r}")
            if self.turn % HELPER_EVERY == 0:
                task = f"{SUB_RULE}. Print the build logs of turn {self.turn}."
                return tool_calls(("create_sub_agent", {"role": "CoderAgent", "task": task,
                                                        "run_in_background": False}))
            return text(f"turn {self.turn} noted -- Ahab", chunk_size=40)
        if last["role"] != "tool" or '"success": true' not in (last.get("content") or ""):
            self.fail("the master's follow-up request does not end with the sub-agent's answer")
        return text("the helper printed the logs -- Ahab", chunk_size=40)

    def sub_agent(self, system: str, seen: str, last: dict) -> Step:
        name = re.match(r"You are (\w+) ", system).group(1)
        with self.lock:
            self.sub_agent_requests += 1
            done = self.commands.get(name, 0)
            self.commands[name] = done + 1
        if SUB_RULE not in seen:
            self.fail(f"{name} lost its task's instruction")
        if done and (last["role"] != "tool" or "alpha,beta" not in (last.get("content") or "")):
            self.fail(f"{name}'s request does not end with its latest command's output")
        if done < COMMANDS_PER_SUB_AGENT:
            return tool_calls(("run_command", {"command": LOUD}))
        return text("printed the logs as CSV")


def test_two_hundred_turns_with_loud_sub_agents_stay_usable_in_a_small_window(make_server, llm):
    team = Team()
    model = WindowedModel(WINDOW, team).serve(llm, summaries=2000)
    # 200 sends in well under a minute: more than the per-user rate limit allows (its own tests are elsewhere).
    server = make_server(env={"MODEL_CONTEXT_TOKENS": str(WINDOW), "RATE_LIMIT_SENDS_PER_MIN": "100000"})
    cid = None
    compactions = 0
    for turn in range(1, TURNS + 1):
        team.turn = turn
        said = f"turn {turn}: {RULE}" if turn == 1 else f"turn {turn}: what about item {turn}? " + "details " * 30
        sent = server.send(said, cid)
        cid = sent["conversation_id"]
        task = server.wait_task(sent["task_id"], timeout=60)
        assert task["status"] == TaskStatus.SUCCEEDED, (turn, task["events"][-3:])
        compactions += sum(e["type"] == ContextCompactedEvent.TYPE for e in task["events"])
        assert team.violations == []
    assert model.refused == []  # no request ever passed the window
    assert team.master_requests == TURNS + TURNS // HELPER_EVERY
    assert len(team.commands) == TURNS // HELPER_EVERY
    assert all(n == COMMANDS_PER_SUB_AGENT + 1 for n in team.commands.values())
    assert compactions and model.summaries <= TURNS  # compaction costs less than one request a turn
    final = next(r.body for r in reversed(llm.agent_requests) if r.body["messages"][-1]["role"] == "user"
                 and text_of(r.body["messages"][0]).startswith("You are MasterAgent"))
    assert RULE in everything_seen(final) and text_of(final["messages"][-1]).startswith(f"turn {TURNS}:")
    assert RULE not in text_of(final["messages"][1])  # ... from the summary: turn 1 itself is long gone

"""The caps on running work hold across server processes (README, "Configuration"; modules/work_caps.py):
two servers on one PostgreSQL database start one user's background commands, sub-agents and foreground commands
at the same time, from several conversations each, and together they start exactly as many as the user's caps
allow."""

from __future__ import annotations

import json
import threading
import uuid

from modules.event_catalogue import ToolResultEvent
from test.db_urls import fresh_database
from test.integration.sandbox_helpers import send_routed
from test.scripted_llm import text, tool_calls
from test.scripted_steps import hang, is_stage_request, match_last_user, match_system

MASTER = match_system("You are MasterAgent")
SUB_AGENT = match_system("You are InfoAgent")
STEPS_PER_SERVER = 3
CALLS_PER_STEP = 5


def _steps_at_once(servers, llm, calls: list[tuple[str, dict]]) -> list[dict]:
    """One master step of `calls` in each of STEPS_PER_SERVER new conversations of alice on every server, all
    sent before any is waited for; every tool result of them."""
    for _ in range(len(servers) * STEPS_PER_SERVER):
        llm.script(tool_calls(*calls), match=MASTER)
        llm.script(text("started what I could"), match=MASTER)
    sent: list[tuple[object, dict]] = []

    def send(server) -> None:
        for _ in range(STEPS_PER_SERVER):
            sent.append((server, send_routed(server, "start it all", token="tok-alice")))

    senders = [threading.Thread(target=send, args=(server,)) for server in servers]
    for thread in senders:
        thread.start()
    for thread in senders:
        thread.join(60)
    results = []
    for server, one in sent:
        task = server.wait_task(one["task_id"], timeout=90, token="tok-alice")
        results += [json.loads(e["data"]["result"]) for e in task["events"] if e["type"] == ToolResultEvent.TYPE]
    return results


def test_two_processes_together_start_no_more_than_the_users_caps(make_server, llm, tmp_path):
    env = {"AUTH_TOKENS": "alice:tok-alice", "MAX_COMMANDS_PER_CONVERSATION": "50", "MAX_COMMANDS_PER_USER": "4",
           "MAX_SUB_AGENTS_PER_CONVERSATION": "50", "MAX_SUB_AGENTS_PER_USER": "3",
           "RATE_LIMIT_SENDS_PER_MIN": "1000", "RATE_LIMIT_CONVERSATIONS_PER_MIN": "1000"}
    with fresh_database("postgresql", tmp_path) as url:
        servers = [make_server(database_url=url, env=env) for _ in range(2)]
        sleeps = [("run_command", {"command": f"sleep 60.{i:02d}", "run_in_background": True})
                  for i in range(CALLS_PER_STEP)]
        results = _steps_at_once(servers, llm, sleeps)
        assert len(results) == 2 * STEPS_PER_SERVER * CALLS_PER_STEP
        assert sum(r["success"] for r in results) == 4, results
        assert all("MAX_COMMANDS_PER_USER" in r["error"] for r in results if not r["success"])

        for _ in range(2 * STEPS_PER_SERVER * CALLS_PER_STEP):
            llm.script(hang(30), match=SUB_AGENT)  # the sub-agents stay busy
        create = [("create_sub_agent", {"role": "InfoAgent", "task": f"research {i}", "run_in_background": True})
                  for i in range(CALLS_PER_STEP)]
        results = _steps_at_once(servers, llm, create)
        assert sum(r["success"] for r in results) == 3, results
        assert all("MAX_SUB_AGENTS_PER_USER" in r["error"] for r in results if not r["success"])
        for server in servers:
            server.stop()


def _foreground_step(server, llm, results: list[dict]) -> None:
    """A new conversation of alice whose master runs a long foreground command; its result added to `results`.
    Its steps match its own message, so another conversation's turn takes none of them."""
    tag = f"run it [{uuid.uuid4().hex[:8]}]"
    mine = match_last_user(tag)

    def match(body: dict) -> bool:
        return not is_stage_request(body) and mine(body)

    # Long enough that every step's command starts (or is refused) while the first ones still run.
    llm.script(tool_calls(("run_command", {"command": "sleep 15"})), match=match)
    llm.script(text("done"), match=match)
    task = server.wait_task(send_routed(server, tag, token="tok-alice")["task_id"], timeout=90, token="tok-alice")
    results += [json.loads(e["data"]["result"]) for e in task["events"] if e["type"] == ToolResultEvent.TYPE]


def test_two_processes_together_run_no_more_foreground_commands_than_the_users_cap(make_server, llm, tmp_path):
    env = {"AUTH_TOKENS": "alice:tok-alice", "MAX_FOREGROUND_COMMANDS_PER_USER": "2",
           "RATE_LIMIT_SENDS_PER_MIN": "1000", "RATE_LIMIT_CONVERSATIONS_PER_MIN": "1000"}
    with fresh_database("postgresql", tmp_path) as url:
        servers = [make_server(database_url=url, env=env) for _ in range(2)]
        results: list[dict] = []
        steps = [threading.Thread(target=_foreground_step, args=(server, llm, results))
                 for server in servers for _ in range(STEPS_PER_SERVER)]
        for thread in steps:
            thread.start()
        for thread in steps:
            thread.join(120)
        assert len(results) == 2 * STEPS_PER_SERVER
        assert sum(r["success"] for r in results) == 2, results
        assert all("MAX_FOREGROUND_COMMANDS_PER_USER" in r["error"] for r in results if not r["success"])
        for server in servers:
            server.stop()

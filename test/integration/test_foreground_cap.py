"""The per-user cap on foreground commands (README, "Configuration": MAX_FOREGROUND_COMMANDS_PER_USER): while a
user's conversations run as many foreground commands as it allows, the next one, in any of the user's
conversations, gets a tool error naming the cap and nothing runs; another user runs his as before, and an ended
command frees its place."""

from __future__ import annotations

import json
import signal
import uuid

import pytest

from modules.event_catalogue import ToolOutputEvent, ToolResultEvent
from modules.statuses import TaskStatus
from test.conftest import TWO_USERS
from test.integration.sandbox_helpers import send_routed
from test.scripted_llm import text, tool_calls
from test.scripted_steps import is_stage_request, match_last_user

CAP = 2


@pytest.fixture
def capped(make_server):
    server = make_server(env={"AUTH_TOKENS": TWO_USERS, "MAX_FOREGROUND_COMMANDS_PER_USER": str(CAP)})
    server.token = "tok-alice"
    return server


def start_command(server, llm, command: str, token: str = "tok-alice", *, ends: bool = False) -> str:
    """A new conversation whose master runs `command` in the foreground; the turn's task id. `ends`: the turn
    answers after the command (else it is to be stopped while the command runs)."""
    tag = f"run it [{uuid.uuid4().hex[:8]}]"
    mine = match_last_user(tag)

    def match(body: dict) -> bool:
        return not is_stage_request(body) and mine(body)

    llm.script(tool_calls(("run_command", {"command": command})), match=match)
    if ends:
        llm.script(text("done"), match=match)
    return send_routed(server, tag, token=token)["task_id"]


def tool_result(server, task_id: str, token: str = "tok-alice") -> dict:
    task = server.wait_task(task_id, timeout=60, token=token)
    return next(json.loads(e["data"]["result"]) for e in task["events"] if e["type"] == ToolResultEvent.TYPE)


def test_a_users_foreground_commands_stop_at_the_cap_across_conversations(capped, llm):
    server = capped
    running = []
    for i in range(CAP):
        task_id = start_command(server, llm, f"echo started-{i}; sleep 60")
        output = server.wait_event(task_id, ToolOutputEvent.TYPE, timeout=30)
        assert f"started-{i}" in output["text"]
        running.append(task_id)

    refused = tool_result(server, start_command(server, llm, "echo never-ran", ends=True))
    assert refused["success"] is False and "MAX_FOREGROUND_COMMANDS_PER_USER" in refused["error"], refused
    assert f"{CAP} foreground commands of this user are already running" in refused["error"]
    assert "never-ran" not in json.dumps(refused)

    bobs = tool_result(server, start_command(server, llm, "echo bob-ran", token="tok-bob", ends=True), "tok-bob")
    assert bobs["success"] is True and "bob-ran" in bobs["output"], bobs

    stopped = running.pop()
    assert server.post(f"/api/tasks/{stopped}/cancel").status_code == 200
    assert server.wait_task(stopped, timeout=30)["status"] == TaskStatus.STOPPED
    freed = tool_result(server, start_command(server, llm, "echo ran-after", ends=True))
    assert freed["success"] is True and "ran-after" in freed["output"], freed
    for task_id in running:
        server.post(f"/api/tasks/{task_id}/cancel")


def test_the_foreground_command_of_a_killed_server_does_not_count_after_its_restart(make_server, llm):
    server = make_server(env={"AUTH_TOKENS": TWO_USERS, "MAX_FOREGROUND_COMMANDS_PER_USER": "1"})
    server.token = "tok-alice"
    task_id = start_command(server, llm, "echo started; sleep 60")
    server.wait_event(task_id, ToolOutputEvent.TYPE, timeout=30)
    server.stop(signal.SIGKILL)
    server.start()
    after = tool_result(server, start_command(server, llm, "echo ran-after-restart", ends=True))
    assert after["success"] is True and "ran-after-restart" in after["output"], after

"""Run one command through a real server's agent turn (shared by the sandbox tests)."""

from __future__ import annotations

import json
import uuid

from modules.event_catalogue import ToolResultEvent
from modules.statuses import SendStatus
from test.conftest import wait_until
from test.scripted_llm import text, tool_calls
from test.scripted_steps import is_stage_request, match_last_user


def send_routed(server, message: str, *, token: str, conversation_id: str | None = None) -> dict:
    """Send `message` as the owner of `token` and wait for its route (`GET /api/messages/<id>`)."""
    body = {"message": message, **({"conversation_id": conversation_id} if conversation_id else {})}
    res = server.post("/api/tasks", body, token=token)
    assert res.status_code == 202, res.text
    path = f"/api/messages/{res.json()['message_id']}"
    return wait_until(lambda: (m := server.get(path, token=token).json()).get("status") == SendStatus.ROUTED and m, 30,
                      what="the message's route")


def run_in_sandbox(server, llm, command: str, *, token: str, conversation_id: str | None = None, **args) -> dict:
    """One turn whose model runs `command` in the foreground (in a new conversation unless one is named); the
    tool's result, with the conversation's id added as `conversation_id`. The steps are this turn's own: a turn
    of another (a notice of a command the server lost when it was killed, delivered after its restart) takes
    none of them."""
    tag = f"please run it [{uuid.uuid4().hex[:8]}]"
    mine = match_last_user(tag)

    def match(body: dict) -> bool:
        return not is_stage_request(body) and mine(body)

    llm.script(tool_calls(("run_command", {"command": command, **args})), match=match)
    llm.script(text("done"), match=match)
    sent = send_routed(server, tag, token=token, conversation_id=conversation_id)
    task = server.wait_task(sent["task_id"], timeout=40, token=token)
    result = next(json.loads(e["data"]["result"]) for e in task["events"] if e["type"] == ToolResultEvent.TYPE)
    return {**result, "conversation_id": sent["conversation_id"]}

"""`make smoke`: in well under 30 s, whether the tree is whole (docs/ARCHITECTURE.md): every module compiles, the
design card's entry points import by their names, and the real server (`run.py`, the scripted model) answers
one REST round trip and one Socket.IO round trip."""

from __future__ import annotations

import importlib
import threading
from pathlib import Path

import socketio

from modules.event_catalogue import TaskCompleteEvent
from modules.statuses import TaskStatus
from test.scripted_llm import text

ROOT = Path(__file__).resolve().parents[2]

# The names a reader of docs/ARCHITECTURE.md looks for, where it says they are.
ENTRY_POINTS = {
    "server.app": ["create_app", "ChatServer"],
    "server.runtime": ["Runtime"],
    "server.chat_flow_task_main": ["handle_task_with_sender", "poll_completion_notifications"],
    "server.chat_flow_tool_loop": ["execute_tool_calls", "inject_runtime_user_message"],
    "server.turns.manager": ["TurnManager"],
    "server.turns.types": ["Turn", "TurnOutcome"],
    "server.turns.end": ["finish_turn"],
    "server.turns.recovery": ["Recovery"],
    "server.user_routing": ["UserMessageRouting"],
    "server.work_control": ["stop_task", "terminate_sub_agent", "cancel_command"],
    "modules.multi_agent.message_router": ["MessageRouter"],
    "modules.multi_agent.active_agent": ["ActiveAgentFastPath", "ActiveAgentSessionStore"],
    "modules.storage.session_store": ["SessionStore"],
    "modules.background_command_manager": ["BackgroundCommandManager"],
    "modules.sub_agent.manager": ["SubAgentManager"],
}


def test_every_module_compiles():
    files = [*ROOT.joinpath("modules").rglob("*.py"), *ROOT.joinpath("server").rglob("*.py"), ROOT / "run.py"]
    for path in files:
        compile(path.read_text(), str(path), "exec")
    assert len(files) > 50


def test_the_entry_points_import_by_name():
    missing = [f"{module}.{name}" for module, names in ENTRY_POINTS.items()
               for name in names if not hasattr(importlib.import_module(module), name)]
    assert missing == []


def test_one_rest_and_one_socket_round_trip(server, llm):
    llm.script(text("hello over REST"))
    sent = server.send("hi")
    task = server.wait_task(sent["task_id"])
    assert task["status"] == TaskStatus.SUCCEEDED and task["events"][-1]["type"] == TaskCompleteEvent.TYPE

    llm.script(text("hello over the socket"))
    done = threading.Event()
    client = socketio.Client(reconnection=False)
    client.on(TaskCompleteEvent.TYPE, lambda data: done.set())
    client.connect(server.url, wait_timeout=10)
    try:
        ack = client.call("send_message", {"message": "hi again", "conversation_id": sent["conversation_id"]},
                          timeout=10)
        assert ack["success"] is True, ack
        assert done.wait(15)
    finally:
        client.disconnect()

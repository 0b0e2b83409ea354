"""`/api/sub_agents` and `/api/background_commands`: list background work, terminate, cancel."""

from __future__ import annotations

from flask import Blueprint, jsonify, request

from modules.storage import agents as agent_store
from modules.storage import tasks as task_store
from server.api.context import current_user_id, owned_conversation, runtime
from server.api.serializers import command_json, sub_agent_json
from server.errors import ApiError, not_found

bp = Blueprint("background", __name__, url_prefix="/api")


def _conversation_arg():
    cid = request.args.get("conversation_id")
    if not cid:
        raise ApiError(400, "missing_conversation_id", "`conversation_id` query parameter is required")
    return owned_conversation(cid, current_user_id())


@bp.get("/sub_agents")
def list_sub_agents():
    conv = _conversation_arg()
    rt = runtime()
    tasks = task_store.list_tasks(rt.db, conv.id)
    last = {t.agent_id: t for t in tasks}
    return jsonify({"success": True, "data": [sub_agent_json(a, last.get(a.id)) for a in rt.sub_agents.list(conv.id)]})


@bp.post("/sub_agents/<agent_id>/terminate")
def terminate_sub_agent(agent_id: str):
    rt = runtime()
    agent = agent_store.get_agent(rt.db, agent_id)
    if agent is None or agent.kind != "sub_agent":
        raise not_found("sub-agent")
    owned_conversation(agent.conversation_id, current_user_id())
    if not rt.sub_agents.mark_terminated(agent.id):
        raise ApiError(409, "already_terminated", f"{agent.display_name} is already terminated")
    rt.tasks.terminate_agent(agent.id)
    return jsonify({"success": True, "agent_id": agent.id, "display_name": agent.display_name,
                    "status": "terminated"})


@bp.get("/background_commands")
def list_commands():
    conv = _conversation_arg()
    commands = runtime().commands
    data = [command_json(c, commands.output_tail(c)) for c in commands.list(conv.id)]
    return jsonify({"success": True, "data": data})


@bp.post("/background_commands/<command_id>/cancel")
def cancel_command(command_id: str):
    commands = runtime().commands
    cmd = commands.get(command_id)
    if cmd is None:
        raise not_found("background command")
    owned_conversation(cmd.conversation_id, current_user_id())
    if not commands.cancel(cmd.id):
        cmd = commands.get(cmd.id) or cmd
        raise ApiError(409, "command_not_running", f"command {cmd.id} is already {cmd.status}")
    return jsonify({"success": True, "command_id": cmd.id, "cancelling": True})

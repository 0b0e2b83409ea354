"""`GET /api/conversations/<id>/export?format=md|json`: every agent's history, master first, as a download."""

from __future__ import annotations

import json
import re
import time
from typing import Any

from flask import Blueprint, Response

from modules.statuses import MessageSource
from modules.storage import agents as agent_store
from modules.storage import messages as message_store
from modules.storage.message_meta import MessageMeta
from modules.storage.models import Agent, Conversation
from server.api.context import owned_conversation, runtime
from server.api.endpoint import endpoint
from server.api.request_models import ExportQuery
from server.api.serializers import agent_out, conversation_out, iso, message_out

bp = Blueprint("export", __name__, url_prefix="/api/conversations")

MEDIA = {"md": "text/markdown", "json": "application/json"}


def _agents_master_first(conversation_id: str) -> list[Agent]:
    agents = agent_store.list_agents(runtime().db, conversation_id)
    return sorted(agents, key=lambda a: (a.kind != "master", a.created_at, a.display_name))


def export_document(conv: Conversation) -> dict[str, Any]:
    """The `json` export: the conversation, then each agent with its history (oldest first)."""
    db = runtime().db
    return {"conversation": conversation_out(conv).model_dump(mode="json"),
            "agents": [{"agent": agent_out(agent).model_dump(mode="json"),
                        "messages": [message_out(m).model_dump(mode="json")
                                     for m in message_store.list_messages(db, agent.id)]}
                       for agent in _agents_master_first(conv.id)]}


def _message_markdown(msg: dict[str, Any], agent_name: str) -> str:
    meta = MessageMeta.load(msg["metadata"])
    if msg["role"] == "user":
        who = "User" if meta.source in (None, MessageSource.USER) else f"Notice ({meta.source})"
    elif msg["role"] == "assistant":
        who = agent_name
    else:
        who = f"Tool result ({msg['name'] or msg['tool_call_id']})"
    lines = [f"**{who}** · {msg['created_at']}", ""]
    if msg["content"]:
        lines += [msg["content"], ""]
    for call in msg["tool_calls"] or []:
        function = call.get("function", {})
        lines += [f"Tool call `{function.get('name')}`:", "", "```json", str(function.get("arguments", "")),
                  "```", ""]
    return "\n".join(lines)


def export_markdown(document: dict[str, Any], exported_at: str | None) -> str:
    conv = document["conversation"]
    parts = [f"# {conv['title']}", "", f"Created {conv['created_at']}, exported {exported_at}.", ""]
    for entry in document["agents"]:
        agent = entry["agent"]
        parts += [f"## {agent['display_name']} ({agent['role']}, {agent['kind']})", ""]
        parts += [_message_markdown(m, agent["display_name"]) for m in entry["messages"]]
    return "\n".join(parts).rstrip() + "\n"


def _filename(conv: Conversation, extension: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9]+", "-", conv.title).strip("-")[:60].lower() or "conversation"
    return f"{slug}-{conv.id[:8]}.{extension}"


@bp.get("/<conversation_id>/export")
@endpoint({}, errors=(400, 404), query=ExportQuery, files={200: "text/markdown"})
def export_conversation(conversation_id: str, query: ExportQuery, user_id: int) -> Response:
    """Download the conversation: every agent's history, master first, with timestamps.

    `format=json` answers `{"conversation": {...}, "agents": [{"agent": {...}, "messages": [...]}]}`
    (application/json); `format=md`, Markdown."""
    conv = owned_conversation(conversation_id, user_id)
    document = export_document(conv)
    if query.format == "json":
        body = json.dumps(document, ensure_ascii=False, indent=2)
    else:
        body = export_markdown(document, iso(time.time()))
    return Response(body, status=200, mimetype=MEDIA[query.format],
                    headers={"Content-Disposition": f'attachment; filename="{_filename(conv, query.format)}"'})

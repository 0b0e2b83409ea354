"""The export as the server wrote it before it streamed (docs/API.md, `GET .../export`): the whole document
built in memory, then rendered at once. Kept verbatim as the reference the streamed export must match byte for
byte, and a builder of that document from the REST API's own answers."""

from __future__ import annotations

import json
from typing import Any

from modules.statuses import MessageSource
from modules.storage.message_meta import MessageMeta


def export_json(document: dict[str, Any]) -> str:
    return json.dumps(document, ensure_ascii=False, indent=2)


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


def document_from_api(server: Any, cid: str) -> dict[str, Any]:
    """The `json` export's document as GET .../<cid>, .../agents and .../messages show its parts (an idle
    conversation: every `pending_count` 0, as the export writes it): agents master first, then by creation
    (the agents' listing's order), without Regenerate's hidden copies."""
    conv = server.get(f"/api/conversations/{cid}").json()
    conversation = {key: conv[key] for key in ("conversation_id", "title", "created_at", "updated_at")}
    agents = server.get(f"/api/conversations/{cid}/agents").json()["data"]
    agents.sort(key=lambda a: a["kind"] != "master")
    entries = []
    for agent in agents:
        assert agent["pending_count"] == 0, agent
        messages = server.get(f"/api/conversations/{cid}/messages", params={"agent": agent["agent_id"]}).json()
        entries.append({"agent": agent, "messages": [m for m in messages["data"]
                                                     if "regenerate_of" not in m["metadata"]]})
    return {"conversation": conversation, "agents": entries}

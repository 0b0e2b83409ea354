"""`GET /api/conversations/<id>/export?format=md|json`: every agent's history, master first, as a download."""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Iterator
from typing import Any

from flask import Blueprint, Response

from modules.storage import agents as agent_store
from modules.storage import messages as message_store
from modules.storage.db import Database
from modules.storage.models import Agent, Conversation, Message
from server.api.context import owned_conversation, runtime
from server.api.endpoint import endpoint
from server.api.export_formats import AgentHistory, json_chunks, markdown_chunks
from server.api.request_models import ExportQuery
from server.api.serializers import agent_out, conversation_out, iso, message_out

bp = Blueprint("export", __name__, url_prefix="/api/conversations")

MEDIA = {"md": "text/markdown", "json": "application/json"}
# Messages read per database round trip while an export streams: the memory an export holds is about one batch.
BATCH = 200


def agents_master_first(db: Database, conversation_id: str) -> list[Agent]:
    agents = agent_store.list_agents(db, conversation_id)
    return sorted(agents, key=lambda a: (a.kind != "master", a.created_at, a.display_name))


def _regenerate_copy(msg: Message) -> bool:
    """Regenerate's hidden copy of the user's message: the model's input, not something the user wrote again."""
    return msg.typed_meta.regenerate_of is not None


def _messages(db: Database, agent_id: str) -> Iterator[dict[str, Any]]:
    for batch in message_store.history_batches(db, agent_id, BATCH):
        for msg in batch:
            if not _regenerate_copy(msg):
                yield message_out(msg).model_dump(mode="json")


def agent_histories(db: Database, agents: list[Agent]) -> Iterator[AgentHistory]:
    """Each agent, master first, with its history, oldest first, read from the database batch by batch."""
    for agent in agents:
        yield AgentHistory(agent_out(agent).model_dump(mode="json"), _messages(db, agent.id))


def _filename(conv: Conversation, extension: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9]+", "-", conv.title).strip("-")[:60].lower() or "conversation"
    return f"{slug}-{conv.id[:8]}.{extension}"


@bp.get("/<conversation_id>/export")
@endpoint({}, errors=(400, 404), query=ExportQuery, files={200: "text/markdown"})
def export_conversation(conversation_id: str, query: ExportQuery, user_id: int) -> Response:
    """Download the conversation: every agent's history, master first, with timestamps.

    `format=json` answers `{"conversation": {...}, "agents": [{"agent": {...}, "messages": [...]}]}`
    (application/json); `format=md`, Markdown. Streamed: the histories are read in batches as they are sent, the
    first chunk's before the answer starts."""
    conv = owned_conversation(conversation_id, user_id)
    db = runtime().db
    histories = agent_histories(db, agents_master_first(db, conv.id))  # (the agents read now: a failure is a 503)
    conversation = conversation_out(conv).model_dump(mode="json")
    if query.format == "json":
        chunks = json_chunks(conversation, histories)
    else:
        chunks = markdown_chunks(conversation, histories, iso(time.time()))
    # The first chunk is read before the answer starts: a database that fails meanwhile is still a 503 (after it,
    # the transfer can only end without its last chunk, an incomplete download).
    body = itertools.chain((next(chunks),), chunks)
    return Response(body, status=200, mimetype=MEDIA[query.format],
                    headers={"Content-Disposition": f'attachment; filename="{_filename(conv, query.format)}"'})

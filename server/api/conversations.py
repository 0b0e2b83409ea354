"""`/api/conversations`: create, list, read, and what a conversation's agents are doing."""

from __future__ import annotations

from flask import Blueprint

from modules.storage import agents as agent_store
from modules.storage import conversations as conversation_store
from modules.storage import messages as message_store
from modules.storage import pending_messages as queue
from modules.storage import summaries as summary_store
from modules.storage.conversation_pages import ConversationCursor
from server import rate_limits
from server.api import response_models as out
from server.api.context import conversation_agent, owned_conversation, runtime
from server.api.endpoint import endpoint
from server.api.request_models import (
    DEFAULT_MESSAGE_PAGE,
    DEFAULT_TITLE,
    ConversationSearchQuery,
    CreateConversationBody,
    MessagePageQuery,
    MessagesQuery,
)
from server.api.serializers import agent_out, conversation_detail, conversation_out, iso, message_out
from server.errors import not_found

bp = Blueprint("conversations", __name__, url_prefix="/api/conversations")


@bp.post("")
@endpoint({201: out.ConversationDetail}, errors=(400, 429), body=CreateConversationBody, body_required=False)
def create_conversation(body: CreateConversationBody, user_id: int) -> tuple[out.ConversationDetail, int]:
    """Create a conversation with its master agent (past RATE_LIMIT_CONVERSATIONS_PER_MIN: 429 `rate_limited`)."""
    rt = runtime()
    rate_limits.check(rt.rate_limiter, rt.settings, rate_limits.CONVERSATIONS, user_id)
    conv, master = conversation_store.create_conversation(rt.db, user_id, body.title.strip() or DEFAULT_TITLE,
                                                          rt.master.name)
    return conversation_detail(conv, [agent_out(master)]), 201


@bp.get("")
@endpoint({200: out.ConversationList}, errors=(400,), query=ConversationSearchQuery)
def list_conversations(query: ConversationSearchQuery, user_id: int) -> out.ConversationList:
    """A page of the caller's conversations, newest first; `q` keeps those whose title or a message contains it.

    `next_cursor`, passed as `before`, asks for the page after this one (keyset paging, docs/API.md)."""
    before = ConversationCursor.decode(query.before) if query.before else None
    page = conversation_store.list_conversations(runtime().db, user_id, query.limit, query.q or None, before)
    return out.ConversationList(data=[conversation_out(c) for c in page.conversations],
                                next_cursor=page.next_cursor.encode() if page.next_cursor else None)


@bp.get("/<conversation_id>")
@endpoint({200: out.ConversationDetail}, errors=(404,))
def get_conversation(conversation_id: str, user_id: int) -> out.ConversationDetail:
    """A conversation with its agents."""
    conv = owned_conversation(conversation_id, user_id)
    return conversation_detail(conv, _agents(conv.id))


@bp.get("/<conversation_id>/messages")
@endpoint({200: out.MessageList}, errors=(400, 404), query=MessagePageQuery)
def list_messages(conversation_id: str, query: MessagePageQuery, user_id: int) -> out.MessageList:
    """One agent's history, oldest first: all of it, or with `before` and/or `limit` one page of it.

    A page is the `limit` messages just before the message `before` (the latest without it); a `before` that
    is not in this agent's history answers 404."""
    conv = owned_conversation(conversation_id, user_id)
    agent = conversation_agent(conv, query.agent)
    db = runtime().db
    if query.before is None and query.limit is None:
        msgs = message_store.list_messages(db, agent.id)
    else:
        page = message_store.messages_before(db, agent.id, query.limit or DEFAULT_MESSAGE_PAGE, query.before)
        if page is None:
            raise not_found("message")
        msgs = page
    return out.MessageList(agent_id=agent.id, display_name=agent.display_name, data=[message_out(m) for m in msgs])


@bp.get("/<conversation_id>/summaries")
@endpoint({200: out.ContextSummaryList}, errors=(404,), query=MessagesQuery)
def list_summaries(conversation_id: str, query: MessagesQuery, user_id: int) -> out.ContextSummaryList:
    """The context summaries of one agent's history (README, "Long conversations"), oldest first."""
    conv = owned_conversation(conversation_id, user_id)
    agent = conversation_agent(conv, query.agent)
    return out.ContextSummaryList(agent_id=agent.id, data=[
        out.ContextSummary(summary_id=s.summary_id, summary=s.content, through_seq=s.through_seq,
                           summarised_messages=s.summarised_messages, tokens_before=s.tokens_before,
                           tokens_after=s.tokens_after, created_at=iso(s.created_at))
        for s in summary_store.list_for_agent(runtime().db, agent.id)])


def _agents(conversation_id: str) -> list[out.Agent]:
    db = runtime().db
    counts = queue.queued_counts(db, conversation_id)
    return [agent_out(a, counts.get(a.id, 0)) for a in agent_store.list_agents(db, conversation_id)]


@bp.get("/<conversation_id>/agents")
@endpoint({200: out.AgentList}, errors=(404,))
def list_agents(conversation_id: str, user_id: int) -> out.AgentList:
    """The conversation's agents with their state and queue size."""
    conv = owned_conversation(conversation_id, user_id)
    return out.AgentList(data=_agents(conv.id))


@bp.get("/<conversation_id>/running-status")
@endpoint({200: out.RunningStatus}, errors=(404,))
def running_status(conversation_id: str, user_id: int) -> out.RunningStatus:
    """Whether the master runs, and what runs in the background."""
    conv = owned_conversation(conversation_id, user_id)
    rt = runtime()
    master = agent_store.get_master(rt.db, conv.id)
    task_id = rt.tasks.active_task_of_agent(master.id)
    pending = len(rt.commands.poll_updates(conv.id)) + len(rt.sub_agents.poll_updates(conv.id))
    return out.RunningStatus(is_main_running=task_id is not None, main_task_id=task_id,
                             **rt.tasks.background_flags(conv.id), pending_notices=pending)

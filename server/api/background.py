"""`/api/sub_agents` and `/api/background_commands`: list background work, terminate, cancel."""

from __future__ import annotations

from flask import Blueprint

from modules.storage import tasks as task_store
from server import work_control
from server.api import response_models as out
from server.api.context import owned_conversation, runtime
from server.api.endpoint import endpoint
from server.api.request_models import ConversationQuery
from server.api.serializers import command_out, sub_agent_out

bp = Blueprint("background", __name__, url_prefix="/api")


@bp.get("/sub_agents")
@endpoint({200: out.SubAgentList}, errors=(400, 404), query=ConversationQuery)
def list_sub_agents(query: ConversationQuery, user_id: int) -> out.SubAgentList:
    """The conversation's sub-agents with the status of their last run."""
    conv = owned_conversation(query.conversation_id, user_id)
    rt = runtime()
    last = {t.agent_id: t for t in task_store.list_tasks(rt.db, conv.id)}
    return out.SubAgentList(data=[sub_agent_out(a, last.get(a.id)) for a in rt.sub_agents.in_conversation(conv.id)])


@bp.post("/sub_agents/<agent_id>/terminate")
@endpoint({200: out.SubAgentTerminated}, errors=(404, 409))
def terminate_sub_agent(agent_id: str, user_id: int) -> out.SubAgentTerminated:
    """Terminate a sub-agent and stop its running task."""
    agent = work_control.terminate_sub_agent(agent_id, user_id)
    return out.SubAgentTerminated(agent_id=agent.id, display_name=agent.display_name)


@bp.get("/background_commands")
@endpoint({200: out.BackgroundCommandList}, errors=(400, 404), query=ConversationQuery)
def list_commands(query: ConversationQuery, user_id: int) -> out.BackgroundCommandList:
    """The conversation's background commands with status, exit code and output tail."""
    conv = owned_conversation(query.conversation_id, user_id)
    commands = runtime().commands
    return out.BackgroundCommandList(data=[command_out(c, commands.output_tail(c))
                                           for c in commands.in_conversation(conv.id)])


@bp.post("/background_commands/<command_id>/cancel")
@endpoint({200: out.CommandCancelling}, errors=(404, 409))
def cancel_command(command_id: str, user_id: int) -> out.CommandCancelling:
    """Cancel a running background command; its notice then says how it ended."""
    return out.CommandCancelling(command_id=work_control.cancel_command(command_id, user_id).id)

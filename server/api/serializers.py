"""Stored rows as the REST answers' models (server/api/response_models.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from modules.statuses import AgentState, CommandStatus, TaskStatus
from modules.storage import models as rows
from modules.storage import tasks as task_store
from server.api import response_models as out


def iso(ts: float | None) -> str | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


def conversation_out(conv: rows.Conversation) -> out.Conversation:
    return out.Conversation(conversation_id=conv.id, title=conv.title, created_at=iso(conv.created_at),
                            updated_at=iso(conv.updated_at))


def conversation_detail(conv: rows.Conversation, agents: list[out.Agent]) -> out.ConversationDetail:
    return out.ConversationDetail(**conversation_out(conv).model_dump(), agents=agents)


def agent_out(agent: rows.Agent, pending_count: int = 0) -> out.Agent:
    return out.Agent(agent_id=agent.id, display_name=agent.display_name, role=agent.role, kind=agent.kind,
                     state=AgentState(agent.state), parent_id=agent.parent_id, pending_count=pending_count)


def message_out(msg: rows.Message) -> out.Message:
    calls = None if msg.tool_calls is None else [out.ToolCall.model_validate(call) for call in msg.tool_calls]
    return out.Message(message_id=msg.message_id, role=msg.role, content=msg.content, tool_calls=calls,
                       tool_call_id=msg.tool_call_id, name=msg.name, metadata=msg.typed_meta, agent_id=msg.agent_id,
                       created_at=iso(msg.created_at))


def _task_fields(task: rows.Task) -> dict[str, Any]:
    return {"task_id": task.id, "status": task.status, "conversation_id": task.conversation_id,
            "agent_id": task.agent_id, "task_type": task.task_type, "created_at": iso(task.created_at),
            "started_at": iso(task.started_at), "finished_at": iso(task.finished_at), "error": task.error}


def task_out(task: rows.Task) -> out.Task:
    return out.Task(**_task_fields(task))


def task_detail(task: rows.Task, events: list[rows.TaskEvent], next_offset: int) -> out.TaskDetail:
    return out.TaskDetail(**_task_fields(task), next_offset=next_offset, events=[
        out.TaskEvent(idx=e.idx, type=e.type, data=e.data, ts=e.ts) for e in events])


def sub_agent_out(agent: rows.Agent, last_task: rows.Task | None) -> out.SubAgent:
    return out.SubAgent(
        **agent_out(agent).model_dump(), task=agent.task, terminated=agent.terminated,
        created_at=iso(agent.created_at),
        status="terminated" if agent.terminated else
        (TaskStatus(last_task.status) if last_task else task_store.PENDING),
        last_task_id=last_task.id if last_task else None)


def command_out(cmd: rows.BackgroundCommand, output_tail: str) -> out.BackgroundCommand:
    return out.BackgroundCommand(
        command_id=cmd.id, conversation_id=cmd.conversation_id, agent_id=cmd.agent_id, command=cmd.command,
        status=CommandStatus(cmd.status), exit_code=cmd.exit_code, output_tail=output_tail,
        output_truncated=cmd.output_truncated,
        error=cmd.error, created_at=iso(cmd.created_at), finished_at=iso(cmd.finished_at))

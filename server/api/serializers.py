"""JSON shapes of the REST answers (API.md)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from modules.storage.models import Agent, BackgroundCommand, Conversation, Message, Task, TaskEvent


def iso(ts: float | None) -> str | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


def conversation_json(conv: Conversation) -> dict[str, Any]:
    return {"conversation_id": conv.id, "title": conv.title, "created_at": iso(conv.created_at),
            "updated_at": iso(conv.updated_at)}


def agent_json(agent: Agent, pending_count: int = 0) -> dict[str, Any]:
    return {"agent_id": agent.id, "display_name": agent.display_name, "role": agent.role, "kind": agent.kind,
            "state": agent.state, "parent_id": agent.parent_id, "pending_count": pending_count}


def message_json(msg: Message) -> dict[str, Any]:
    return {"message_id": msg.message_id, "role": msg.role, "content": msg.content,
            "tool_calls": msg.tool_calls, "tool_call_id": msg.tool_call_id, "name": msg.name,
            "metadata": msg.meta or {}, "agent_id": msg.agent_id, "created_at": iso(msg.created_at)}


def task_json(task: Task) -> dict[str, Any]:
    return {"task_id": task.id, "status": task.status, "conversation_id": task.conversation_id,
            "agent_id": task.agent_id, "task_type": task.task_type, "created_at": iso(task.created_at),
            "started_at": iso(task.started_at), "finished_at": iso(task.finished_at), "error": task.error}


def event_json(event: TaskEvent) -> dict[str, Any]:
    return {"idx": event.idx, "type": event.type, "data": event.data, "ts": event.ts}


def sub_agent_json(agent: Agent, last_task: Task | None) -> dict[str, Any]:
    return {**agent_json(agent), "task": agent.task, "terminated": agent.terminated,
            "created_at": iso(agent.created_at),
            "status": "terminated" if agent.terminated else (last_task.status if last_task else "pending"),
            "last_task_id": last_task.id if last_task else None}


def command_json(cmd: BackgroundCommand, output_tail: str) -> dict[str, Any]:
    return {"command_id": cmd.id, "conversation_id": cmd.conversation_id, "agent_id": cmd.agent_id,
            "command": cmd.command, "status": cmd.status, "exit_code": cmd.exit_code, "output_tail": output_tail,
            "output_truncated": cmd.output_truncated, "error": cmd.error, "created_at": iso(cmd.created_at),
            "finished_at": iso(cmd.finished_at)}

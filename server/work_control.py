"""Stop a task, terminate a sub-agent, cancel a background command: each with the caller's ownership checked
and the same answer when it already ended, for REST (server/api/*) and Socket.IO (server/socket_handlers.py)
alike (docs/ARCHITECTURE.md, "Where each mechanism lives")."""

from __future__ import annotations

from typing import Any

from modules.domain_errors import Conflict
from modules.storage.models import Agent, BackgroundCommand, Task
from server.api.context import owned_command, owned_sub_agent, owned_task, runtime


def stop_task(task_id: Any, user_id: int) -> Task:
    """Stop the caller's task wherever it runs; 404 when it is not theirs, 409 `task_not_running` when it ended."""
    task = owned_task(task_id, user_id)
    if not runtime().tasks.stop(task.id):
        raise Conflict("task_not_running", f"task {task.id} is already {task.status}")
    return task


def terminate_sub_agent(agent_id: Any, user_id: int) -> Agent:
    """Terminate the caller's sub-agent and end its work; 409 `already_terminated` the second time."""
    rt = runtime()
    agent = owned_sub_agent(agent_id, user_id)
    if not rt.sub_agents.mark_terminated(agent.id):
        raise Conflict("already_terminated", f"{agent.display_name} is already terminated")
    rt.tasks.terminate_agent(agent.id)
    return agent


def cancel_command(command_id: Any, user_id: int) -> BackgroundCommand:
    """Cancel the caller's running background command; 409 `command_not_running` when it ended."""
    commands = runtime().commands
    cmd = owned_command(command_id, user_id)
    if not commands.cancel(cmd.id):
        cmd = commands.get(cmd.id) or cmd
        raise Conflict("command_not_running", f"command {cmd.id} is already {cmd.status}")
    return cmd

"""`run_command`: a shell command in the conversation's own workspace folder."""

from __future__ import annotations

import uuid
from typing import Any

from modules.tools.base import ToolContext, ToolSpec
from modules.tools.shell import run_shell

MAX_COMMAND_CHARS = 10_000


def _run_command(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    command = args["command"].strip()
    if not command:
        return {"success": False, "error": "command is empty"}
    if len(command) > MAX_COMMAND_CHARS:
        return {"success": False, "error": f"command is longer than {MAX_COMMAND_CHARS} characters"}
    limit = ctx.settings.command_timeout_s
    timeout = args.get("timeout")
    if timeout is not None and timeout <= 0:
        return {"success": False, "error": "timeout must be a positive number of seconds"}
    timeout_s = min(float(timeout), limit) if timeout is not None else limit
    if args.get("run_in_background"):
        svc = ctx.require_services()
        command_id = svc.commands.start(ctx.conversation_id, ctx.agent_id, ctx.agent_display_name, command,
                                        ctx.workspace, timeout_s)
        return {"success": True, "command_id": command_id, "status": "running", "command": command,
                "note": "Runs in the background. You will receive a notice with its exit code and output when "
                        "it finishes; do not claim it is done before that notice arrives."}
    log_path = ctx.settings.data_dir / "command_logs" / f"{uuid.uuid4()}.log"
    outcome = run_shell(
        command, cwd=ctx.workspace, log_path=log_path, timeout_s=timeout_s,
        tail_chars=ctx.settings.command_output_tail_chars, should_stop=ctx.should_stop,
    )
    log_path.unlink(missing_ok=True)
    result: dict[str, Any] = {
        "success": outcome.exit_code == 0 and not outcome.timed_out and not outcome.stopped,
        "command": command,
        "exit_code": outcome.exit_code,
        "output": outcome.output,
        "output_truncated": outcome.truncated,
        "duration_s": outcome.duration_s,
    }
    if outcome.timed_out:
        result["error"] = f"timed out after {timeout_s:g} s; the command's process group was killed"
    elif outcome.stopped:
        result["error"] = "stopped by the user"
    return result


RUN_COMMAND = ToolSpec(
    name="run_command",
    description=(
        "Run a shell command in this conversation's workspace folder and return its exit code "
        "and the tail of its output."
    ),
    parameters={
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The shell command line."},
            "timeout": {"type": "number", "description": "Seconds before the command is killed."},
            "run_in_background": {"type": "boolean",
                                  "description": "Return at once with a command_id; a notice follows on completion."},
        },
        "required": ["command"],
    },
    handler=_run_command,
)

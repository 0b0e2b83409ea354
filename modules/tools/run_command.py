"""`run_command`: a shell command in the conversation's own workspace, inside the command sandbox."""

from __future__ import annotations

import hashlib
import math
import uuid
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from modules.storage import commands as command_store
from modules.tools.base import NonBlank, ToolArguments, ToolContext, ToolSpec
from modules.tools.live_output import LiveOutput
from modules.tools.shell import read_tail, run_shell
from modules.work_caps import CapReached

MAX_COMMAND_CHARS = 10_000


def parse_timeout(value: Any, limit: float) -> float:
    """The model's `timeout` as seconds within the operator's limit; ValueError says what is wrong.

    NaN and infinity would disable the limit (every comparison with NaN is false), so they are refused."""
    if value is None:
        return limit
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("timeout must be a number of seconds")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"timeout must be a positive, finite number of seconds, got {value!r}")
    return min(float(value), limit)


def foreground_log_path(data_dir: Path, agent_id: str, tool_call_id: str) -> Path:
    """Where a foreground command's output goes while it runs: named by its call, so that after a restart
    that killed it, recovery finds the partial output of the call it closes (docs/ARCHITECTURE.md)."""
    key = hashlib.sha256(f"{agent_id}\0{tool_call_id}".encode()).hexdigest()[:32]
    return data_dir / "command_logs" / f"fg-{key}.log"


def partial_output(data_dir: Path, agent_id: str, tool_call_id: str, tail_chars: int) -> dict[str, Any]:
    """The output tail a killed foreground command left, for the result its call is closed with; empty when
    there is none. The log stays (a retried transaction reads it again); log pruning removes it later."""
    path = foreground_log_path(data_dir, agent_id, tool_call_id)
    if not path.exists():
        return {}
    output, truncated = read_tail(path, tail_chars)
    return {"output": output, "output_truncated": truncated}


class RunCommandArguments(ToolArguments):
    command: NonBlank = Field(description="The shell command line.")
    timeout: float | None = Field(None, description="Seconds before the command is killed.")
    run_in_background: bool = Field(False, description="Return at once with a command_id; a notice follows on "
                                                       "completion.")

    @field_validator("command")
    @classmethod
    def _not_too_long(cls, command: str) -> str:
        if len(command) > MAX_COMMAND_CHARS:
            raise ValueError(f"longer than {MAX_COMMAND_CHARS} characters")
        return command


def _run_command(ctx: ToolContext, args: RunCommandArguments) -> dict[str, Any]:
    command = args.command
    refusal = ctx.sandbox.refusal()
    if refusal:
        return {"success": False, "error": refusal}
    try:
        timeout_s = parse_timeout(args.timeout, ctx.settings.command_timeout_s)
    except ValueError as exc:
        return {"success": False, "error": str(exc)}
    disk = ctx.sandbox.disk_problem(ctx.workspace)
    if disk:
        return {"success": False, "error": disk}
    if args.run_in_background:
        svc = ctx.require_services()
        try:
            command_id = svc.commands.start(ctx.conversation_id, ctx.agent_id, command, ctx.workspace, timeout_s)
        except CapReached as exc:
            return {"success": False, "error": str(exc)}
        return {"success": True, "command_id": command_id, "status": command_store.RUNNING, "command": command,
                "note": "Runs in the background. You will receive a notice with its exit code and output when "
                        "it finishes; do not claim it is done before that notice arrives."}
    log_path = foreground_log_path(ctx.settings.data_dir, ctx.agent_id, ctx.tool_call_id or str(uuid.uuid4()))
    try:
        with ctx.require_services().foreground.running(ctx.conversation_id, ctx.agent_id):
            outcome = run_shell(
                command, sandbox=ctx.sandbox, cwd=ctx.workspace, log_path=log_path, timeout_s=timeout_s,
                tail_chars=ctx.settings.command_output_tail_chars, log_max_bytes=ctx.settings.command_log_max_bytes,
                should_stop=ctx.should_stop,
                on_output=LiveOutput(ctx.emit, ctx.tool_call_id) if ctx.tool_call_id else lambda data: None,
            )
    except CapReached as exc:
        return {"success": False, "error": str(exc)}
    finally:
        log_path.unlink(missing_ok=True)
    result: dict[str, Any] = {
        "success": (outcome.exit_code == 0 and not outcome.timed_out and not outcome.stopped
                    and not outcome.disk_error),
        "command": command,
        "exit_code": outcome.exit_code,
        "output": outcome.output,
        "output_truncated": outcome.truncated,
        "duration_s": outcome.duration_s,
    }
    if outcome.timed_out:
        result["error"] = f"timed out after {timeout_s:g} s; every process of the command was killed"
    elif outcome.stopped:
        result["error"] = "stopped by the user"
    elif outcome.disk_error:
        result["error"] = f"stopped: {outcome.disk_error}"
    return result


RUN_COMMAND = ToolSpec(
    name="run_command",
    description=(
        "Run a shell command in this conversation's workspace (/workspace, inside a sandbox: the system is "
        "read-only, /tmp is private, the network is off unless the operator enabled it, and every process "
        "the command starts ends with it) and return its exit code and the tail of its output."
    ),
    arguments=RunCommandArguments,
    handler=_run_command,
)

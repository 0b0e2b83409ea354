"""What every tool shares: its context, its spec, and argument checking.

Tools answer with a JSON object that always has `success`; a malformed call from
the model becomes a clear error result, never an exception in the tool loop.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modules.config import Settings
from modules.tools.sandbox import Sandbox

if TYPE_CHECKING:
    from modules.agents.services import AgentServices


@dataclass(frozen=True)
class ToolContext:
    conversation_id: str
    agent_id: str
    agent_display_name: str
    workspace: Path
    settings: Settings
    sandbox: Sandbox
    should_stop: Callable[[], bool] = field(default=lambda: False)
    task_id: str = ""
    services: AgentServices | None = None
    emit: Callable[[str, dict[str, Any]], Any] = field(default=lambda event_type, data: None)

    def require_services(self) -> AgentServices:
        if self.services is None:
            raise RuntimeError("this tool needs the agent services")
        return self.services


class ToolArgumentError(ValueError):
    """The model's arguments do not fit the tool's schema."""


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]
    handler: Callable[[ToolContext, dict[str, Any]], dict[str, Any]]

    def definition(self) -> dict[str, Any]:
        return {"type": "function", "function": {
            "name": self.name, "description": self.description, "parameters": self.parameters,
        }}


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "boolean": (bool,), "integer": (int,), "number": (int, float), "object": (dict,),
    "array": (list,),
}


def parse_arguments(spec: ToolSpec, raw: str | None) -> dict[str, Any]:
    """Decode and check the model's argument JSON against the spec's top-level schema."""
    text = (raw or "").strip() or "{}"
    try:
        args = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ToolArgumentError(f"arguments are not valid JSON ({exc.msg} at position {exc.pos})") from exc
    if not isinstance(args, dict):
        raise ToolArgumentError("arguments must be a JSON object")
    props = spec.parameters.get("properties", {})
    missing = [name for name in spec.parameters.get("required", []) if name not in args]
    if missing:
        raise ToolArgumentError(f"missing required argument(s): {', '.join(missing)}")
    for name, value in args.items():
        expected = props.get(name, {}).get("type")
        if expected and value is not None:
            ok = isinstance(value, _JSON_TYPES[expected])
            if expected in ("integer", "number") and isinstance(value, bool):
                ok = False
            if not ok:
                raise ToolArgumentError(f"argument {name!r} must be of type {expected}")
    return args

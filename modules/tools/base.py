"""What every tool shares: its context, its spec, and its arguments as one pydantic model each.

Tools answer with a JSON object that always has `success`; a malformed call from
the model becomes a clear error result, never an exception in the tool loop.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError, model_validator

from modules.config import Settings
from modules.event_catalogue import Event
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
    tool_call_id: str = ""
    services: AgentServices | None = None
    emit: Callable[[Event], Any] = field(default=lambda event: None)

    def require_services(self) -> AgentServices:
        if self.services is None:
            raise RuntimeError("this tool needs the agent services")
        return self.services


class ToolArgumentError(ValueError):
    """The model's arguments do not fit the tool's schema."""


class ToolArguments(BaseModel):
    """One tool's arguments: the schema the model sees and the check of what it sends, from one definition.

    Strict: a string is never taken for a number, nor `true` for 1. Unknown arguments are ignored, and so is an
    argument sent as `null` (models send that for an optional one they mean to leave out): its default applies,
    or, for a required one, the error says it is missing."""

    model_config = ConfigDict(strict=True, extra="ignore", hide_input_in_errors=True)

    @model_validator(mode="before")
    @classmethod
    def _nulls_left_out(cls, data: Any) -> Any:
        return {k: v for k, v in data.items() if v is not None} if isinstance(data, dict) else data


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value.strip()


NonBlank = Annotated[str, AfterValidator(_not_blank)]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    arguments: type[ToolArguments]
    handler: Callable[[ToolContext, Any], dict[str, Any]]

    @property
    def parameters(self) -> dict[str, Any]:
        """The JSON schema of `arguments`, without pydantic's titles (they tell the model nothing)."""
        schema: dict[str, Any] = _untitled(self.arguments.model_json_schema())
        return schema

    def definition(self) -> dict[str, Any]:
        return {"type": "function", "function": {
            "name": self.name, "description": self.description, "parameters": self.parameters,
        }}


def _untitled(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _untitled(v) for k, v in schema.items() if not (k == "title" and isinstance(v, str))}
    if isinstance(schema, list):
        return [_untitled(v) for v in schema]
    return schema


def parse_arguments(spec: ToolSpec, raw: str | None) -> ToolArguments:
    """Decode the model's argument JSON and validate it against the tool's arguments model."""
    text = (raw or "").strip() or "{}"
    try:
        args = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ToolArgumentError(f"arguments are not valid JSON ({exc.msg} at position {exc.pos})") from exc
    if not isinstance(args, dict):
        raise ToolArgumentError("arguments must be a JSON object")
    try:
        return spec.arguments.model_validate(args)
    except ValidationError as exc:
        raise ToolArgumentError(_explain(exc)) from None


def _explain(exc: ValidationError) -> str:
    """Pydantic's errors as a sentence the model can act on: what is missing, then what is wrong."""
    errors = exc.errors(include_url=False)
    missing = [str(e["loc"][0]) for e in errors if e["type"] == "missing"]
    wrong = [f"argument {'.'.join(str(p) for p in e['loc'])!r}: {e['msg'].removeprefix('Value error, ')}"
             for e in errors if e["type"] != "missing"]
    parts = [f"missing required argument(s): {', '.join(missing)}"] if missing else []
    return "; ".join(parts + wrong)

"""The catalogue of every event the server sends to clients (docs/API.md, "Socket.IO"), and the only way
to build one.

One frozen dataclass per event, its name in `TYPE` (a `Literal`): the emitter builds it
(`sender.emit(TextChunkEvent(message_id=..., content=...))`) and `data()` is its payload, the `data` of a task
log entry (`GET /api/tasks/<id>`) and of the Socket.IO event of the same name. The sender adds the
envelope its `SCOPE` names (a task event gets its `task_id`, `conversation_id`, `agent_id`, and `idx` on
the socket copy). A field defaulting to None is left out of the payload when None (optional on the wire).
`tools/gen_event_types.py` turns this module into `frontend/src/generated/events.ts`, so a renamed field
breaks the UI's type check, not the page; `wire_model` is what tests check captured events against
(unknown keys refused). A test fails when an event name is written as a string anywhere else.
"""

import dataclasses
import functools
import operator
from enum import StrEnum
from typing import Any, ClassVar, Literal, NotRequired, get_args, get_type_hints

from pydantic import BaseModel, ConfigDict, create_model
from typing_extensions import TypedDict

from modules.statuses import AgentState, Delivery, MessageSource, Route, Visibility

Scope = Literal["task", "task_or_room", "room", "server"]


class TaskEnvelope(TypedDict):
    """What the sender adds to every event of a task's log; `idx` (its index in the log) only on the socket
    copy."""

    task_id: str
    conversation_id: str
    agent_id: str
    idx: NotRequired[int]


class RoomEnvelope(TypedDict):
    """An event sent to a conversation's room, and logged in a task's too when it happens in one."""

    conversation_id: str
    agent_id: str
    task_id: NotRequired[str]
    idx: NotRequired[int]


class NoEnvelope(TypedDict):
    pass


ENVELOPES: dict[Scope, Any] = {"task": TaskEnvelope, "task_or_room": RoomEnvelope, "room": NoEnvelope,
                                "server": NoEnvelope}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Event:
    """The base of every event: `TYPE` is its name, `SCOPE` what the sender adds (see ENVELOPES)."""

    TYPE: ClassVar[str]
    SCOPE: ClassVar[Scope] = "task"

    def data(self) -> dict[str, Any]:
        """The payload, without the envelope; optional fields that are None are left out."""
        optional = _optional_fields(type(self))
        return {name: value for name, value in vars(self).items() if value is not None or name not in optional}


_OPTIONAL: dict[type[Event], frozenset[str]] = {}


def _optional_fields(cls: type[Event]) -> frozenset[str]:
    """The fields left out when None (read once per class: `data()` runs for every streamed chunk)."""
    if cls not in _OPTIONAL:
        _OPTIONAL[cls] = frozenset(f.name for f in dataclasses.fields(cls) if f.default is None)
    return _OPTIONAL[cls]


@dataclasses.dataclass(frozen=True, kw_only=True)
class UserMessageEvent(Event):
    """A message the agent now sees: the user's, a completion notice, a question or an answer."""

    TYPE: ClassVar[Literal["user_message"]] = "user_message"
    message: str
    message_id: str
    source: MessageSource
    visibility: Visibility
    starts_work: bool
    metadata: dict[str, Any]
    agent_id: str | None = None  # whose history it joined, when not the task's agent


@dataclasses.dataclass(frozen=True, kw_only=True)
class RouteEvent(Event):
    """Where a user's message went: sent to the room when routed (no `task_id`/`idx`), and logged in the
    receiving task after the `user_message` it routed."""

    TYPE: ClassVar[Literal["route"]] = "route"
    SCOPE: ClassVar[Scope] = "task_or_room"
    route: Route
    delivery: Delivery
    target_agent: str
    message_id: str
    agent_id: str | None = None  # the receiver, when sent to the room
    conversation_id: str | None = None  # when sent to the room


@dataclasses.dataclass(frozen=True, kw_only=True)
class AiMessageStartEvent(Event):
    TYPE: ClassVar[Literal["ai_message_start"]] = "ai_message_start"
    message_id: str
    display_name: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class TextChunkEvent(Event):
    TYPE: ClassVar[Literal["text_chunk"]] = "text_chunk"
    message_id: str
    content: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReasoningChunkEvent(Event):
    """The model's thinking as it streams (coalesced like `text_chunk`); never part of the reply's text."""

    TYPE: ClassVar[Literal["reasoning_chunk"]] = "reasoning_chunk"
    message_id: str
    content: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class TextEndEvent(Event):
    """The full text of a reply; `partial` and `error_code` when the model failed mid-answer, `partial` and
    `stopped` when the user stopped it mid-answer, `truncated` when the provider cut it at its output limit
    (`finish_reason: "length"`, Mistral's `"model_length"`), `filtered` when the provider's content filter stopped
    it (`finish_reason: "content_filter"`, Zhipu's `"sensitive"`); `reasoning` is the model's thinking, never part
    of `content` (the history keeps the same marks and the reasoning in `metadata`)."""

    TYPE: ClassVar[Literal["text_end"]] = "text_end"
    message_id: str
    content: str
    partial: bool | None = None
    error_code: str | None = None
    stopped: bool | None = None
    truncated: bool | None = None
    filtered: bool | None = None
    reasoning: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class ContextCompactedEvent(Event):
    """The agent's older messages were summarised for its model (README, "Long conversations"): from now on
    its model sees `summary` in place of its history up to `through_seq`; the stored history stays whole.
    Token counts are the estimate of the agent's next request before and after."""

    TYPE: ClassVar[Literal["context_compacted"]] = "context_compacted"
    summary_id: str
    summary: str
    through_seq: int
    summarised_messages: int
    tokens_before: int
    tokens_after: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class ToolStartEvent(Event):
    TYPE: ClassVar[Literal["tool_start"]] = "tool_start"
    tool_call_id: str
    name: str
    arguments: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class ToolResultEvent(Event):
    """`result` is the tool's JSON result object, serialised."""

    TYPE: ClassVar[Literal["tool_result"]] = "tool_result"
    tool_call_id: str
    name: str
    result: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class ToolOutputEvent(Event):
    """New output of a running foreground `run_command`, at most a few a second; `truncated` once the call's
    cap of live text is reached (the `tool_result` still has the output's tail)."""

    TYPE: ClassVar[Literal["tool_output"]] = "tool_output"
    tool_call_id: str
    text: str
    truncated: bool


@dataclasses.dataclass(frozen=True, kw_only=True)
class AgentStateEvent(Event):
    """An agent's state change; outside any task (sent to the room only) it has no `task_id`/`idx`."""

    TYPE: ClassVar[Literal["agent_state"]] = "agent_state"
    SCOPE: ClassVar[Scope] = "task_or_room"
    state: AgentState
    previous: AgentState
    display_name: str
    agent_id: str
    conversation_id: str | None = None  # when sent to the room


@dataclasses.dataclass(frozen=True, kw_only=True)
class AskUserEvent(Event):
    TYPE: ClassVar[Literal["ask_user"]] = "ask_user"
    question_id: str
    question: str
    options: list[str]
    display_name: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class SuggestionsEvent(Event):
    """1 to 4 follow-up questions for the reply `message_id`."""

    TYPE: ClassVar[Literal["suggestions"]] = "suggestions"
    questions: list[str]
    message_id: str


class BusySubAgent(TypedDict):
    agent_id: str
    display_name: str
    summary: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class SubAgentWaitingEvent(Event):
    TYPE: ClassVar[Literal["sub_agent_waiting"]] = "sub_agent_waiting"
    count: int
    tasks: list[BusySubAgent]


@dataclasses.dataclass(frozen=True, kw_only=True)
class TaskEndFlags(Event):
    """What every end of a task says: what still runs in the conversation."""

    has_running_sub_agents: bool
    has_running_background_commands: bool


@dataclasses.dataclass(frozen=True, kw_only=True)
class TaskEndEvent(TaskEndFlags):
    """`task_stopped`, the end of a stopped task (`task_complete` and `error` carry the same flags)."""

    TYPE: ClassVar[Literal["task_stopped"]] = "task_stopped"


class UsageSums(TypedDict):
    """Tokens of model requests as the provider reported them (`estimated` of them were estimated: it
    reported none); `cost` by the price table (MODEL_PRICES), null while no request had a price."""

    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    reasoning_tokens: int
    requests: int
    estimated: int
    cost: float | None


@dataclasses.dataclass(frozen=True, kw_only=True)
class TaskCompleteEvent(TaskEndFlags):
    """The turn answered; `usage`: what its model requests used."""

    TYPE: ClassVar[Literal["task_complete"]] = "task_complete"
    usage: UsageSums


@dataclasses.dataclass(frozen=True, kw_only=True)
class ErrorEvent(TaskEndFlags):
    TYPE: ClassVar[Literal["error"]] = "error"
    code: str
    message: str
    resets_at: float | None = None  # `budget_exceeded`: when the used-up budget's period starts again

    @classmethod
    def of(cls, error: dict[str, Any] | None, *, has_running_sub_agents: bool,
           has_running_background_commands: bool) -> "ErrorEvent":
        """The event of a failed task's stored `error` (`code`, `message`, maybe `resets_at`)."""
        error = error or {}
        return cls(code=str(error.get("code", "internal_error")), message=str(error.get("message", "")),
                   resets_at=error.get("resets_at"), has_running_sub_agents=has_running_sub_agents,
                   has_running_background_commands=has_running_background_commands)


@dataclasses.dataclass(frozen=True, kw_only=True)
class PendingCountEvent(Event):
    """An agent's queue of waiting messages changed (sent to the room only, outside any task log)."""

    TYPE: ClassVar[Literal["pending_count"]] = "pending_count"
    SCOPE: ClassVar[Scope] = "room"
    agent_id: str
    conversation_id: str
    pending_count: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class ServerDegradedEvent(Event):
    TYPE: ClassVar[Literal["server_degraded"]] = "server_degraded"
    SCOPE: ClassVar[Scope] = "server"
    code: Literal["database_unavailable"]
    database: Literal["unavailable"]
    since: float
    message: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class ServerRecoveredEvent(Event):
    TYPE: ClassVar[Literal["server_recovered"]] = "server_recovered"
    SCOPE: ClassVar[Scope] = "server"
    database: Literal["available"]
    since: float


# Every event the server emits, by its name.
EVENTS: dict[str, type[Event]] = {cls.TYPE: cls for cls in (
    UserMessageEvent, RouteEvent, AiMessageStartEvent, TextChunkEvent, ReasoningChunkEvent, TextEndEvent,
    ContextCompactedEvent, ToolStartEvent, ToolResultEvent, ToolOutputEvent, AgentStateEvent, AskUserEvent,
    SuggestionsEvent, SubAgentWaitingEvent, TaskCompleteEvent, TaskEndEvent, ErrorEvent, PendingCountEvent,
    ServerDegradedEvent, ServerRecoveredEvent)}


def wire_fields(cls: type[Event]) -> dict[str, tuple[Any, bool]]:
    """The payload's fields as clients get it, envelope first: name -> (annotation, required)."""
    envelope = ENVELOPES[cls.SCOPE]
    out: dict[str, tuple[Any, bool]] = {name: (tp, name in envelope.__required_keys__)
                                        for name, tp in get_type_hints(envelope).items()}
    hints = get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.name not in out:
            optional = f.default is None
            tp = _without_none(hints[f.name]) if optional else hints[f.name]
            out[f.name] = (_wire_type(tp), not optional)
    return out


def _wire_type(tp: Any) -> Any:
    """A status set as the `Literal` of its values: clients get (and tests check) plain strings."""
    if isinstance(tp, type) and issubclass(tp, StrEnum):
        return Literal[tuple(member.value for member in tp)]
    return tp


def _without_none(tp: Any) -> Any:
    """`X | None` as `X`: an optional field is left out when None, never sent as null."""
    args = tuple(a for a in get_args(tp) if a is not type(None))
    return functools.reduce(operator.or_, args)


def wire_model(cls: type[Event]) -> type[BaseModel]:
    """A pydantic model of the payload as clients get it (unknown keys refused), for tests to check
    captured events against."""
    fields: dict[str, Any] = {name: (tp, ... if required else None)
                              for name, (tp, required) in wire_fields(cls).items()}
    return create_model(cls.__name__ + "Wire", __config__=ConfigDict(extra="forbid"), **fields)

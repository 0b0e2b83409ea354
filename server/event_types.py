"""The catalogue of every event the server sends to clients (docs/API.md, "Socket.IO").

One TypedDict per event `type`: the `data` of a task log entry (`GET /api/tasks/<id>`) and the payload of
the Socket.IO event of the same name. `tools/gen_event_types.py` turns this module into
`frontend/src/generated/events.ts`, so a renamed field breaks the UI's type check, not the page; a test
checks that the generated file is current and that events seen during integration runs conform (unknown
keys are refused, hence `extra="forbid"`).
"""

from typing import Any, Literal, NotRequired

from pydantic import ConfigDict, with_config
from typing_extensions import TypedDict

_STRICT = ConfigDict(extra="forbid")

Route = Literal["hil", "fast_path", "pipeline"]
Delivery = Literal["resolved", "injected_inline", "triggered_new_turn", "queued"]
AgentStateName = Literal["idle", "running", "waiting", "completed"]
MessageSource = Literal["user", "sub_agent", "background_command", "agent_message", "guidance"]
Visibility = Literal["chat", "compact", "hidden"]


@with_config(_STRICT)
class TaskEventBase(TypedDict):
    """What every event of a task's log carries; `idx` (its index in the log) only on the socket copy."""

    task_id: str
    conversation_id: str
    agent_id: str
    idx: NotRequired[int]


@with_config(_STRICT)
class UserMessageEvent(TaskEventBase):
    """A message the agent now sees: the user's, a completion notice, a question or an answer."""

    message: str
    message_id: str
    source: MessageSource
    visibility: Visibility
    starts_work: bool
    metadata: dict[str, Any]


@with_config(_STRICT)
class RouteEvent(TypedDict):
    """Where a user's message went: sent to the room when routed (no `task_id`/`idx`), and logged in the
    receiving task after the `user_message` it routed."""

    route: Route
    delivery: Delivery
    target_agent: str
    message_id: str
    conversation_id: str
    agent_id: str
    task_id: NotRequired[str]
    idx: NotRequired[int]


@with_config(_STRICT)
class AiMessageStartEvent(TaskEventBase):
    message_id: str
    display_name: str


@with_config(_STRICT)
class TextChunkEvent(TaskEventBase):
    message_id: str
    content: str


@with_config(_STRICT)
class ReasoningChunkEvent(TaskEventBase):
    """The model's thinking as it streams (coalesced like `text_chunk`); never part of the reply's text."""

    message_id: str
    content: str


@with_config(_STRICT)
class TextEndEvent(TaskEventBase):
    """The full text of a reply; `partial` and `error_code` when the model failed mid-answer, `partial` and
    `stopped` when the user stopped it mid-answer, `truncated` when the provider cut it at its output limit
    (`finish_reason: "length"`); `reasoning` is the model's thinking, never part of `content` (the history
    keeps the same marks and the reasoning in `metadata`)."""

    message_id: str
    content: str
    partial: NotRequired[bool]
    error_code: NotRequired[str]
    stopped: NotRequired[bool]
    truncated: NotRequired[bool]
    reasoning: NotRequired[str]


@with_config(_STRICT)
class ContextCompactedEvent(TaskEventBase):
    """The agent's older messages were summarised for its model (README, "Long conversations"): from now on
    its model sees `summary` in place of its history up to `through_seq`; the stored history stays whole.
    Token counts are the estimate of the agent's next request before and after."""

    summary_id: str
    summary: str
    through_seq: int
    summarised_messages: int
    tokens_before: int
    tokens_after: int


@with_config(_STRICT)
class ToolStartEvent(TaskEventBase):
    tool_call_id: str
    name: str
    arguments: str


@with_config(_STRICT)
class ToolResultEvent(TaskEventBase):
    """`result` is the tool's JSON result object, serialised."""

    tool_call_id: str
    name: str
    result: str


@with_config(_STRICT)
class ToolOutputEvent(TaskEventBase):
    """New output of a running foreground `run_command`, at most a few a second; `truncated` once the call's
    cap of live text is reached (the `tool_result` still has the output's tail)."""

    tool_call_id: str
    text: str
    truncated: bool


@with_config(_STRICT)
class AgentStateEvent(TypedDict):
    """An agent's state change; outside any task (sent to the room only) it has no `task_id`/`idx`."""

    state: AgentStateName
    previous: AgentStateName
    display_name: str
    agent_id: str
    conversation_id: str
    task_id: NotRequired[str]
    idx: NotRequired[int]


@with_config(_STRICT)
class AskUserEvent(TaskEventBase):
    question_id: str
    question: str
    options: list[str]
    display_name: str


@with_config(_STRICT)
class SuggestionsEvent(TaskEventBase):
    """1 to 4 follow-up questions for the reply `message_id`."""

    questions: list[str]
    message_id: str


@with_config(_STRICT)
class BusySubAgent(TypedDict):
    agent_id: str
    display_name: str
    summary: str


@with_config(_STRICT)
class SubAgentWaitingEvent(TaskEventBase):
    count: int
    tasks: list[BusySubAgent]


@with_config(_STRICT)
class TaskEndEvent(TaskEventBase):
    """`task_complete` and `task_stopped`."""

    has_running_sub_agents: bool
    has_running_background_commands: bool


@with_config(_STRICT)
class ErrorEvent(TaskEndEvent):
    code: str
    message: str


@with_config(_STRICT)
class PendingCountEvent(TypedDict):
    """An agent's queue of waiting messages changed (sent to the room only, outside any task log)."""

    agent_id: str
    conversation_id: str
    pending_count: int


@with_config(_STRICT)
class ServerDegradedEvent(TypedDict):
    code: Literal["database_unavailable"]
    database: Literal["unavailable"]
    since: float
    message: str


@with_config(_STRICT)
class ServerRecoveredEvent(TypedDict):
    database: Literal["available"]
    since: float


# Every event `type` the server emits, with its data. Keep in step with the emit sites (grep `emit(`).
EVENTS: dict[str, type] = {
    "user_message": UserMessageEvent,
    "route": RouteEvent,
    "ai_message_start": AiMessageStartEvent,
    "text_chunk": TextChunkEvent,
    "reasoning_chunk": ReasoningChunkEvent,
    "text_end": TextEndEvent,
    "context_compacted": ContextCompactedEvent,
    "tool_start": ToolStartEvent,
    "tool_result": ToolResultEvent,
    "tool_output": ToolOutputEvent,
    "agent_state": AgentStateEvent,
    "ask_user": AskUserEvent,
    "suggestions": SuggestionsEvent,
    "sub_agent_waiting": SubAgentWaitingEvent,
    "task_complete": TaskEndEvent,
    "task_stopped": TaskEndEvent,
    "error": ErrorEvent,
    "pending_count": PendingCountEvent,
    "server_degraded": ServerDegradedEvent,
    "server_recovered": ServerRecoveredEvent,
}

"""What each REST call answers (API.md); handlers build these, so `/openapi.json` shows what is sent."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from modules.statuses import AgentState, CommandStatus, Delivery, QueueStatus, Route, SendStatus, TaskStatus
from modules.storage.message_meta import MessageMeta
from server.api.validation import ResponseModel

Timestamp = str | None  # ISO 8601 in UTC, `...Z`


class ErrorBody(ResponseModel):
    """Every failure, with a 4xx/5xx status."""

    # Built by hand (server/errors.py), not dumped from the model: a key with a default may be missing.
    sends_defaults: ClassVar[bool] = False

    success: Literal[False]
    error: str = Field(description="what went wrong, for people")
    code: str = Field(description="what went wrong, for programs (API.md lists the codes)")
    retry_after_s: int | None = Field(None, description="429 `rate_limited`: seconds until it may be sent again "
                                                        "(also the `Retry-After` header)")


class BudgetState(ResponseModel):
    kind: Literal["tokens", "cost"]
    period: Literal["day", "month"]
    limit: float
    used: float


class BudgetExceededBody(ErrorBody):
    """429: `budget_exceeded` (the caller used up a budget, BUDGET_*: with `resets_at` and `budget`) or
    `rate_limited` (RATE_LIMIT_*: with `retry_after_s`); nothing was stored."""

    resets_at: float | None = Field(None, description="`budget_exceeded`: epoch seconds (UTC) when the budget's "
                                                       "day or month starts again")
    budget: BudgetState | None = None


class Conversation(ResponseModel):
    conversation_id: str
    title: str
    created_at: Timestamp
    updated_at: Timestamp


class Agent(ResponseModel):
    agent_id: str
    display_name: str
    role: str
    kind: str = Field(description="`master` or `sub_agent`")
    state: AgentState = Field(description="`idle`, `running`, `waiting` or `completed`")
    parent_id: str | None
    pending_count: int = Field(description="messages queued for the agent")


class ConversationDetail(Conversation):
    success: Literal[True] = True
    agents: list[Agent]


class ConversationList(ResponseModel):
    success: Literal[True] = True
    data: list[Conversation] = Field(description="newest first (by last activity)")
    next_cursor: str | None = Field(description="pass as `before` for the next page; null on the last page")


class ToolFunction(ResponseModel):
    name: str
    arguments: str = Field(description="the model's JSON arguments, as it wrote them")


class ToolCall(ResponseModel):
    """A tool call of an assistant message, as the model's API spells it."""

    id: str
    type: Literal["function"]
    function: ToolFunction


class Message(ResponseModel):
    message_id: str
    role: str
    content: str | None
    tool_calls: list[ToolCall] | None
    tool_call_id: str | None
    name: str | None
    metadata: MessageMeta = Field(description="the message's meta: its set keys only (docs/API.md)")
    agent_id: str
    created_at: Timestamp


class MessageList(ResponseModel):
    success: Literal[True] = True
    agent_id: str
    display_name: str
    data: list[Message] = Field(description="the agent's history, oldest first")


class ContextSummary(ResponseModel):
    summary_id: str
    summary: str = Field(description="what the agent's model sees in place of its history up to `through_seq`")
    through_seq: int
    summarised_messages: int
    tokens_before: int
    tokens_after: int
    created_at: Timestamp


class ContextSummaryList(ResponseModel):
    success: Literal[True] = True
    agent_id: str
    data: list[ContextSummary] = Field(description="oldest first; the newest is the one in use")


class AgentList(ResponseModel):
    success: Literal[True] = True
    data: list[Agent]


class RunningStatus(ResponseModel):
    success: Literal[True] = True
    is_main_running: bool
    main_task_id: str | None
    has_running_sub_agents: bool
    has_running_background_commands: bool
    pending_notices: int


class SendAccepted(ResponseModel):
    success: Literal[True] = True
    message_id: str
    conversation_id: str
    status: SendStatus = Field(SendStatus.ROUTING,
                               description="`routing`: stored, and its route follows as a `route` event (and from "
                                           "GET /api/messages/<message_id>); `routed`: routed already (a retried "
                                           "send, or the message's route asked for afterwards)")
    task_id: str | None = Field(None, description="the task that will see the message, once routed")
    agent_id: str | None = None
    route: Route | None = Field(None, description="`hil`, `fast_path` or `pipeline`, once routed")
    delivery: Delivery | None = Field(None, description="`resolved`, `injected_inline`, `triggered_new_turn` or "
                                                        "`queued` (stored; its turn starts once the database is back), "
                                                        "once routed")
    target_agent: str | None = None


class MessageRoute(SendAccepted):
    """Where a sent message went (`GET /api/messages/<message_id>`)."""


class Task(ResponseModel):
    task_id: str
    status: TaskStatus = Field(description="`pending`, `running`, `succeeded`, `failed` or `stopped`")
    conversation_id: str
    agent_id: str
    task_type: str
    created_at: Timestamp
    started_at: Timestamp
    finished_at: Timestamp
    error: dict[str, Any] | None


class TaskList(ResponseModel):
    success: Literal[True] = True
    data: list[Task] = Field(description="oldest first")


class TaskEvent(ResponseModel):
    idx: int
    type: str
    data: dict[str, Any]
    ts: float


class TaskDetail(Task):
    success: Literal[True] = True
    events: list[TaskEvent]
    next_offset: int = Field(description="`from` of the next poll")


class TaskStopping(ResponseModel):
    success: Literal[True] = True
    task_id: str
    stopping: Literal[True] = True


class SubAgent(Agent):
    task: str | None
    terminated: bool
    created_at: Timestamp
    status: TaskStatus | Literal["terminated"]
    last_task_id: str | None


class SubAgentList(ResponseModel):
    success: Literal[True] = True
    data: list[SubAgent]


class SubAgentTerminated(ResponseModel):
    success: Literal[True] = True
    agent_id: str
    display_name: str
    status: Literal["terminated"] = "terminated"


class BackgroundCommand(ResponseModel):
    command_id: str
    conversation_id: str
    agent_id: str
    command: str
    status: CommandStatus
    exit_code: int | None
    output_tail: str
    output_truncated: bool
    error: str | None
    created_at: Timestamp
    finished_at: Timestamp


class BackgroundCommandList(ResponseModel):
    success: Literal[True] = True
    data: list[BackgroundCommand]


class CommandCancelling(ResponseModel):
    success: Literal[True] = True
    command_id: str
    cancelling: Literal[True] = True


class WorkspaceFile(ResponseModel):
    """A regular file at the top of the conversation's workspace (`/workspace` to its agents' commands)."""

    name: str
    size: int = Field(description="bytes")
    modified: Timestamp


class WorkspaceFileList(ResponseModel):
    success: Literal[True] = True
    data: list[WorkspaceFile] = Field(description="by name (code point order)")
    next_cursor: str | None = Field(description="pass as `cursor` for the next page; null on the last page")


class QueuedMessage(ResponseModel):
    """A user's message that no agent has read yet."""

    message_id: str
    content: str
    status: Literal[QueueStatus.ROUTING, QueueStatus.QUEUED] = Field(
        description="`routing`: stored, its receiver not chosen yet; `queued`: waiting in its receiver's queue")
    agent_id: str | None = Field(description="the receiver, once routed")
    target_agent: str | None
    created_at: Timestamp


class QueuedMessageList(ResponseModel):
    success: Literal[True] = True
    data: list[QueuedMessage] = Field(description="in the order they were sent")


class UsageSums(ResponseModel):
    """Sums over model requests (docs/API.md, "Usage and budgets")."""

    prompt_tokens: int = Field(description="as the provider reported them (cached ones included)")
    completion_tokens: int = Field(description="reasoning tokens included")
    cached_tokens: int = Field(description="prompt tokens served from the provider's cache")
    reasoning_tokens: int
    requests: int = Field(description="model requests, failed ones included")
    estimated: int = Field(description="of these requests, those whose tokens were estimated (the provider "
                                       "reported none)")
    cost: float | None = Field(description="by the price table (MODEL_PRICES); null while no request had a price")


class ConversationUsage(ResponseModel):
    success: Literal[True] = True
    conversation_id: str
    totals: UsageSums
    by_agent: dict[str, UsageSums] = Field(description="by agent display name or routing stage")
    by_purpose: dict[str, UsageSums] = Field(description="`agent`, `routing`, `rewrite`, `intent`, `suggestions`, "
                                                         "`compaction`")
    by_model: dict[str, UsageSums]
    by_task: dict[str, UsageSums] = Field(description="by task: the model requests of each turn (what the UI "
                                                      "shows on a reply)")


class UsageDay(UsageSums):
    day: str = Field(description="UTC day, `YYYY-MM-DD`")


class UserUsage(ResponseModel):
    success: Literal[True] = True
    start: str = Field(alias="from", description="first UTC day")
    end: str = Field(alias="to", description="last UTC day")
    totals: UsageSums
    days: list[UsageDay] = Field(description="days with requests, oldest first")

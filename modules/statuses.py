"""Every set of states a record or event can be in, one `StrEnum` each, defined here only.

Storage, the server, the tests and the UI all use these (`tools/gen_statuses.py` writes them to
`frontend/src/generated/statuses.ts`); a member is a `str`, so it is stored, compared and sent as its value.
docs/ARCHITECTURE.md ("Events, statuses and meta") says where each set is written.
"""

from __future__ import annotations

from enum import StrEnum


class TaskStatus(StrEnum):
    """A task (one turn of one agent), `GET /api/tasks/<id>`'s `status`."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    STOPPED = "stopped"


ACTIVE_TASK_STATUSES = (TaskStatus.PENDING, TaskStatus.RUNNING)
FINAL_TASK_STATUSES = (TaskStatus.SUCCEEDED, TaskStatus.FAILED, TaskStatus.STOPPED)


class CommandStatus(StrEnum):
    """A background command (modules/background_command_manager.py)."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"
    LOST = "lost"


FINISHED_COMMAND_STATUSES = (CommandStatus.SUCCEEDED, CommandStatus.FAILED, CommandStatus.TIMED_OUT,
                             CommandStatus.CANCELLED, CommandStatus.LOST)


class Delivery(StrEnum):
    """What delivering a routed message did (modules/multi_agent/message_router.py)."""

    RESOLVED = "resolved"  # it answered a blocked ask
    INJECTED_INLINE = "injected_inline"  # the receiver's running turn reads it at its next step
    TRIGGERED_NEW_TURN = "triggered_new_turn"
    QUEUED = "queued"  # stored, but the database went away before its delivery: a sweep delivers it


class QueueStatus(StrEnum):
    """A row of the message queue (modules/storage/pending_messages.py, modules/storage/unrouted.py)."""

    ROUTING = "routing"  # a user's message, its receiver not chosen yet
    QUEUED = "queued"
    CONSUMED = "consumed"  # read into its receiver's history


class SendStatus(StrEnum):
    """What a send answers (`SendAccepted.status`, `GET /api/messages/<id>`'s `status`; docs/API.md)."""

    ROUTING = "routing"  # stored; its route follows as a `route` event
    ROUTED = "routed"  # routed already (a retried send, or the message's route asked for afterwards)


class Route(StrEnum):
    """How a user's message was routed (server/user_routing.py)."""

    HIL = "hil"  # the answer to an open `ask_user` question
    FAST_PATH = "fast_path"
    PIPELINE = "pipeline"


class AgentState(StrEnum):
    """An agent's state; modules/multi_agent/agent_state.py holds the transitions between them."""

    IDLE = "idle"
    RUNNING = "running"
    WAITING = "waiting"
    COMPLETED = "completed"


# A sub-agent not yet completed or terminated.
ACTIVE_AGENT_STATES = (AgentState.IDLE, AgentState.RUNNING, AgentState.WAITING)
# An agent at work: in a turn, or blocked in one on an answer.
BUSY_AGENT_STATES = (AgentState.RUNNING, AgentState.WAITING)


class MessageSource(StrEnum):
    """Who wrote a user-role message an agent sees (the message meta's `source`)."""

    USER = "user"
    SUB_AGENT = "sub_agent"
    BACKGROUND_COMMAND = "background_command"
    AGENT_MESSAGE = "agent_message"
    GUIDANCE = "guidance"


class Visibility(StrEnum):
    """How the UI shows a user-role message (the message meta's `visibility`)."""

    CHAT = "chat"
    COMPACT = "compact"
    HIDDEN = "hidden"


# The sets the UI gets, by the name of their TypeScript type.
STATUS_SETS: dict[str, type[StrEnum]] = {
    "TaskStatus": TaskStatus, "CommandStatus": CommandStatus, "QueueStatus": QueueStatus, "Delivery": Delivery,
    "SendStatus": SendStatus, "Route": Route,
    "AgentState": AgentState, "MessageSource": MessageSource, "Visibility": Visibility,
}
# Named subsets the UI gets too (a final task status ends its log polling).
STATUS_GROUPS: dict[str, tuple[StrEnum, ...]] = {
    "ACTIVE_TASK_STATUSES": ACTIVE_TASK_STATUSES, "FINAL_TASK_STATUSES": FINAL_TASK_STATUSES,
    "FINISHED_COMMAND_STATUSES": FINISHED_COMMAND_STATUSES,
}

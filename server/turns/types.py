"""The records of a turn (docs/ARCHITECTURE.md, "The turn package")."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from modules.agents.profiles import MASTER_KIND, AgentProfile
from modules.context.history_tail import HistoryTail
from modules.statuses import MessageSource, TaskStatus
from modules.storage.models import Agent, Message
from modules.storage.tasks import FAILED, STOPPED, SUCCEEDED

__all__ = ["CLAIM_TRUSTED_S", "FAILED", "STOPPED", "SUCCEEDED", "Collect", "StartCheck", "StartTurn", "Turn",
           "TurnOutcome"]

Collect = Callable[[Session, Agent, str], list[Message]]
"""Inside the transaction that claims `agent` for the new task `task_id`: the messages its turn starts on."""

StartTurn = Callable[[str, Collect], str | None]
"""The TurnManager's claim of an idle agent, given what to collect: the new task's id, or None."""


# How long after its claim a turn's first model call trusts the owner the claim wrote. A peer takes a task over only
# once this process's heartbeat looks stale, which can happen at any moment, so the trust is kept short: a thread
# that starts late under load reads the owner again, as every later call does.
CLAIM_TRUSTED_S = 1.0


@dataclass(frozen=True)
class StartCheck:
    """What a turn's start found a moment before its first model call, so that call reads neither the task's
    owner nor the queue again: the claim's transaction had just written the task as this process's, and the
    start counted the messages queued for the agent (the count the room was sent; None when it could not be
    read)."""

    queued: int | None


@dataclass
class Turn:
    """One turn of one agent (one task row): who runs, what started it, and its stop switch.

    The loop reads the first five fields; the manager adds what the turn's end needs: the agent's kind and
    parent (whether a completion notice goes up), whether the user started it, what its start drained, and
    whether its start recorded the active agent."""

    task_id: str
    conversation_id: str
    agent_id: str
    display_name: str
    profile: AgentProfile
    kind: str = MASTER_KIND
    parent_id: str | None = None
    from_user: bool = False
    drained: list[Message] = field(default_factory=list)  # what the turn's start took from the queue, in order
    # Its start recorded its agent as the active one (a turn on the user's messages, in the claim's transaction):
    # the first model request's pre-reasoning hook need not write it again.
    active_recorded: bool = False
    start_check: StartCheck | None = None  # set by the manager as the turn starts; taken by its first model call
    # It wrote a reply with tool calls: only then can its end find a call of its own without a result.
    wrote_tool_calls: bool = False
    # What its end needs of its history, noted as it is written (a read of the turn's messages at every end was
    # about 1 % of 500 streams' CPU, issue 26): its last reply with text, as (message id, text), and the text of the
    # last message the user wrote it (drained at its start or inline), for the suggestions and a sub-agent's result.
    reply: tuple[str, str] | None = None
    user_text: str | None = None
    # The ids of the messages its inline batches drained since its last model request: none has read them yet. A
    # stop before the next request puts them back in the queue (server/turns/end.py), for the follow-up turn.
    unread: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    stop_event: threading.Event = field(default_factory=threading.Event)
    history: HistoryTail = field(init=False)  # the history its model requests read (only what is new each time)

    def __post_init__(self) -> None:
        self.history = HistoryTail(self.agent_id)
        self.note_drained(self.drained)

    def note_drained(self, messages: list[Message]) -> None:
        """Messages drained into its history (at its start or inline): the user's last one is noted."""
        for message in messages:
            if message.role == "user" and message.typed_meta.source == MessageSource.USER:
                self.user_text = message.content or ""

    def stopped(self) -> bool:
        return self.stop_event.is_set()

    def take_start_check(self) -> StartCheck | None:
        """The start's check, once: later model calls read again."""
        check, self.start_check = self.start_check, None
        return check


@dataclass(frozen=True)
class TurnOutcome:
    status: TaskStatus
    error: dict[str, Any] | None = None

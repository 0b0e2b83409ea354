"""Receiver-decided message routing over durable per-agent queues (README, "Architecture").

Every message to an agent (a user's message, a task, a question, an answer, a
completion notice) is first committed to the receiver's queue. Then the
receiver's state decides what happens:

- `waiting`, and the message answers its blocked ask -> the ask's tool call
  returns it (`resolved`);
- `running` (or waiting for something else) -> it stays queued and is drained
  before the agent's next model call (`injected_inline`); if the turn ends
  without another model call, the end-of-turn check starts a new turn;
- `idle` / `completed` -> one new turn starts that drains the whole queue
  (`triggered_new_turn`).

"Turn ends" and "message arrives" both write first and read second (state
then queue; queue then state), so at least one of them sees the other and
the message is never stranded; starting a turn is a compare-and-set on the
agent's state, so two of them never start two turns.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Row, select
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.orm import Session

from modules.multi_agent import agent_state
from modules.storage import agents as agent_store
from modules.storage import messages as message_store
from modules.storage import pending_messages as queue
from modules.storage import unrouted
from modules.storage.db import Database
from modules.storage.group_commit import GroupCommit
from modules.storage.messages import MessageDraft
from modules.storage.models import Agent, Message, PendingMessageRow
from modules.storage.records import new_id, now

log = logging.getLogger(__name__)

RESOLVED, INJECTED_INLINE, TRIGGERED_NEW_TURN = "resolved", "injected_inline", "triggered_new_turn"
QUEUED = "queued"  # stored, but the database went away before its delivery: a sweep delivers it
MESSAGE_TYPES = ("task", "output", "ask", "message", "answer", "notice")


class RouteError(ValueError):
    """The message cannot be delivered (unknown or terminated receiver)."""


@dataclass(frozen=True)
class PendingMessage:
    id: str
    conversation_id: str
    source_display_name: str
    source_agent_id: str | None
    target_agent_id: str
    type: str
    content: str
    question_id: str | None = None
    created_at: float = field(default_factory=now)
    meta: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def new(cls, *, conversation_id: str, target_agent_id: str, type: str, content: str,
            source_display_name: str, source_agent_id: str | None = None, question_id: str | None = None,
            meta: dict[str, Any] | None = None, id: str | None = None) -> PendingMessage:
        if type not in MESSAGE_TYPES:
            raise ValueError(f"unknown message type {type!r}")
        return cls(id=id or new_id(), conversation_id=conversation_id, source_display_name=source_display_name,
                   source_agent_id=source_agent_id, target_agent_id=target_agent_id, type=type, content=content,
                   question_id=question_id, meta=dict(meta or {}))

    @classmethod
    def from_row(cls, row: PendingMessageRow | Row) -> PendingMessage:
        return cls(id=row.id, conversation_id=row.conversation_id, source_display_name=row.source_display_name,
                   source_agent_id=row.source_agent_id, target_agent_id=row.target_agent_id, type=row.type,
                   content=row.content, question_id=row.question_id, created_at=row.created_at,
                   meta=dict(row.meta or {}))

    def row_values(self) -> dict[str, Any]:
        """Its `PendingMessageRow` columns, for the queue's batched insert."""
        return dict(
            id=self.id, conversation_id=self.conversation_id, target_agent_id=self.target_agent_id,
            source_agent_id=self.source_agent_id, source_display_name=self.source_display_name, type=self.type,
            content=self.content, question_id=self.question_id, meta=self.meta, created_at=self.created_at,
        )

    @property
    def source(self) -> str:
        """The `user_message` source: user, sub_agent, background_command, agent_message or guidance."""
        return self.meta.get("source", "agent_message")


@dataclass(frozen=True)
class RouteResult:
    delivery: str
    task_id: str | None = None


def history_text(msg: PendingMessage) -> str:
    """How a queued message reads in its receiver's history: who sent it, and the id to answer with."""
    if msg.source == "user" and msg.meta.get("rewritten_query"):
        return f"{msg.content}\n\n[Understood as: {msg.meta['rewritten_query']}]"
    if msg.source in ("user", "sub_agent", "background_command") or msg.type == "task":
        return msg.content
    if msg.type == "ask":
        return (f"[Question {msg.question_id} from {msg.source_display_name}] {msg.content}\n"
                f"(Reply with your answer tool, question_id={msg.question_id}.)")
    if msg.type == "answer":
        return f"[Answer to {msg.question_id} from {msg.source_display_name}] {msg.content}"
    return f"[Message from {msg.source_display_name}] {msg.content}"


def history_draft(msg: PendingMessage, *, starts_work: bool) -> MessageDraft:
    meta = {key: value for key, value in msg.meta.items() if key not in ("source", "visibility", "routed")}
    meta.update(source=msg.source, visibility=msg.meta.get("visibility", "chat"), starts_work=starts_work,
                message_type=msg.type, from_agent=msg.source_display_name)
    if msg.question_id:
        meta["question_id"] = msg.question_id
    return MessageDraft(role="user", content=history_text(msg), meta=meta, message_id=msg.id)


@dataclass
class AskWaiter:
    """A blocked ask of one agent; resolved by the matching answer, or any message from the agent asked
    that was sent after the ask began (one sent before it, still queued, is not a reply to it)."""

    agent_id: str
    question_id: str
    asked_agent_id: str | None
    from_user: bool = False
    event: threading.Event = field(default_factory=threading.Event)
    answer: PendingMessage | None = None
    since: float = field(default_factory=now)
    closed: bool = False  # the ask has ended: an answer taken now must go back to the queue

    def matches(self, msg: PendingMessage) -> bool:
        if msg.type == "answer" and msg.question_id == self.question_id:
            return True
        if msg.created_at < self.since:
            return False
        if self.from_user:
            return msg.source == "user"
        return self.asked_agent_id is not None and msg.source_agent_id == self.asked_agent_id


class MessageRouter:
    """`settle_s`: a completion notice to an idle agent that still has background work running waits
    until no other notice arrived for this long (at most `max_settle_s`), so a wave of completions
    costs one turn, not one each; the last completion of all wakes the agent at once."""

    def __init__(self, db: Database, *, spawn: Callable[..., Any] | None = None, settle_s: float = 0.0,
                 max_settle_s: float = 0.5, rescan_s: float = 1.0, writer: GroupCommit | None = None):
        self._db = db
        self._writer = writer or GroupCommit(db)  # concurrent sends share transactions
        # A blocked ask also looks in its queue this often, for an answer that another server process
        # queued and whose signal (`notify_peers`) it missed.
        self._rescan_s = rescan_s
        self._spawn = spawn
        self._settle_s = settle_s
        self._max_settle_s = max_settle_s
        self._last_notice: dict[str, float] = {}
        self._waiters: dict[str, AskWaiter] = {}
        self._lock = threading.Lock()
        # Wired by the server: start a turn for an idle agent with queued messages (returns its task id),
        # and the id of an agent's task in progress.
        self.wake: Callable[[str], str | None] = lambda agent_id: None
        self.active_task_of: Callable[[str], str | None] = lambda agent_id: None
        # Whether completions may still come for the agent (its commands or sub-agents still run):
        # only then is a notice worth holding back for the rest of its wave.
        self.more_completions_expected: Callable[[str], bool] = lambda agent_id: True
        # Tell the other server processes that a waiting agent has a queued message: its blocked ask
        # may run there. They call `on_peer_queued`.
        self.notify_peers: Callable[[str], None] = lambda agent_id: None

    # -- sending ---------------------------------------------------------
    def route_message(self, target_agent_id: str, message: PendingMessage) -> RouteResult:
        """Commit the message to the receiver's queue, then deliver it by the receiver's state."""
        if message.target_agent_id != target_agent_id:
            raise ValueError("message target does not match")
        def enqueue(s: Session) -> None:
            # The receiver's row is share-locked while the message is queued: a termination (which discards
            # the queue) commits either before, and the sender hears it, or after, and takes this along.
            agent = s.execute(select(Agent.display_name, Agent.terminated).where(Agent.id == target_agent_id)
                              .with_for_update(read=True)).first()
            if agent is None:
                raise RouteError(f"no agent {target_agent_id}")
            if agent.terminated:
                raise RouteError(f"{agent.display_name} was terminated and takes no more messages")
            self.enqueue_in(s, message)

        self._writer.call(enqueue)
        # Delivered again when it was queued before (a retried send whose first try died after queueing):
        # delivery only starts or joins the turn that drains the queue, so it never duplicates the message.
        return self._deliver_stored(message)

    def _deliver_stored(self, message: PendingMessage) -> RouteResult:
        try:
            return self.deliver(message)
        except (OperationalError, InterfaceError):
            # Stored all the same: the membership sweep starts the turn that reads it once the database is back.
            log.warning("message %s is stored, but the database went away before its delivery", message.id)
            return RouteResult(QUEUED)

    def release(self, message: PendingMessage) -> RouteResult | None:
        """Queue a user message held for routing (`storage.unrouted`) for the receiver it now names, then
        deliver it as `route_message` does; None when another process released it first."""
        with self._db.write() as s:
            agent = s.scalars(select(Agent).where(Agent.id == message.target_agent_id)
                              .with_for_update(read=True)).first()
            if agent is None or agent.terminated:
                raise RouteError(f"{agent.display_name if agent else message.target_agent_id} takes no more messages")
            released = unrouted.release_in(s, message.id, dict(
                target_agent_id=message.target_agent_id, type=message.type, question_id=message.question_id,
                meta=message.meta))
        return self._deliver_stored(message) if released else None

    def stored(self, message_id: str) -> PendingMessage | None:
        """A message already in a queue (queued or consumed), by id."""
        row = queue.get_message(self._db, message_id)
        return PendingMessage.from_row(row) if row is not None else None

    def enqueue_in(self, session: Session, message: PendingMessage) -> bool:
        """Enqueue inside the caller's transaction (a completion is queued with its finish mark).
        Call `deliver` after the commit."""
        return queue.enqueue_in(session, message.row_values())

    def enqueue_many_in(self, session: Session, messages: list[PendingMessage]) -> list[PendingMessage]:
        """`enqueue_in` for a batch (a wave of completions): one lookup and one insert; returns the new ones."""
        fresh = set(queue.enqueue_many_in(session, [m.row_values() for m in messages]))
        return [m for m in messages if m.id in fresh]

    def deliver(self, message: PendingMessage) -> RouteResult:
        """The receiver-decided step for a message already committed to its queue."""
        target = message.target_agent_id
        with self._lock:
            waiter = self._waiters.get(target)
        if waiter is not None and waiter.matches(message) and self._resolve(waiter, message):
            return RouteResult(RESOLVED, self.active_task_of(target))
        agent = agent_store.get_agent(self._db, target)
        if agent is not None and agent.terminated:
            # Queued past the termination (a command of the agent that ended after it): nobody will read it.
            with self._db.write() as s:
                queue.discard_in(s, target, "terminated")
            return RouteResult(INJECTED_INLINE)
        if waiter is None and agent is not None and agent.state == agent_state.WAITING:
            self.notify_peers(target)
        if agent is not None and agent.state in (agent_state.IDLE, agent_state.COMPLETED):
            if (message.type == "notice" and self._settle_s > 0 and self._spawn is not None
                    and self.more_completions_expected(target)):
                self._wake_when_settled(target)
                return RouteResult(TRIGGERED_NEW_TURN)
            task_id = self.wake(target)
            if task_id is not None:
                return RouteResult(TRIGGERED_NEW_TURN, task_id)
        return RouteResult(INJECTED_INLINE, self.active_task_of(target))

    def _wake_when_settled(self, agent_id: str) -> None:
        with self._lock:
            first = agent_id not in self._last_notice
            self._last_notice[agent_id] = time.monotonic()
        if first:
            self._spawn(self._settle_then_wake, agent_id)

    def _settle_then_wake(self, agent_id: str) -> None:
        deadline = time.monotonic() + self._max_settle_s
        while True:
            with self._lock:
                quiet_at = self._last_notice[agent_id] + self._settle_s
            current = time.monotonic()
            if current >= quiet_at or current >= deadline:
                break
            time.sleep(min(quiet_at, deadline) - current)
        with self._lock:
            del self._last_notice[agent_id]
        self.wake(agent_id)

    # -- draining --------------------------------------------------------
    def drain_to_history_in(self, session: Session, agent_id: str, conversation_id: str, consumed_by: str,
                            *, last_starts_work: bool) -> list[Message]:
        """Move the whole queue into the agent's history inside the caller's transaction.

        With `last_starts_work`, the last message is the one that starts a turn and the
        ones before it are marked `starts_work: false` (the notification pool's N-1 + 1).
        """
        rows = queue.drain_in(session, agent_id, consumed_by)
        drafts = [
            history_draft(PendingMessage.from_row(row), starts_work=last_starts_work and i == len(rows) - 1)
            for i, row in enumerate(rows)
        ]
        return message_store.append_in(session, conversation_id, agent_id, drafts) if drafts else []

    def consume_pending_messages(self, agent_id: str, conversation_id: str, consumed_by: str) -> list[Message]:
        """Drain the queue into the history in one transaction: each message is consumed exactly once."""
        with self._db.write() as s:
            return self.drain_to_history_in(s, agent_id, conversation_id, consumed_by, last_starts_work=False)

    def has_queued(self, agent_id: str) -> bool:
        return queue.has_queued(self._db, agent_id)

    # -- blocking asks ---------------------------------------------------
    def begin_ask(self, agent_id: str, question_id: str, asked_agent_id: str | None,
                  *, from_user: bool = False) -> AskWaiter:
        """Register the waiter before the question is sent, so no answer can slip past it."""
        waiter = AskWaiter(agent_id, question_id, asked_agent_id, from_user)
        with self._lock:
            self._waiters[agent_id] = waiter
        return waiter

    def wait_for_answer(self, waiter: AskWaiter, timeout_s: float, should_stop: Callable[[], bool],
                        poll_s: float = 0.1) -> PendingMessage | None:
        """Block until the answer arrives (one that came early is taken from the queue), the
        timeout passes, or the turn is stopped. None on timeout or stop."""
        deadline = time.monotonic() + timeout_s
        try:
            self._take_queued_answer(waiter)
            next_scan = time.monotonic() + self._rescan_s
            while not waiter.event.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0 or should_stop():
                    break
                waiter.event.wait(min(poll_s, remaining))
                if time.monotonic() >= next_scan:  # an answer queued by another server process
                    self._take_queued_answer(waiter)
                    next_scan = time.monotonic() + self._rescan_s
        finally:
            self.end_ask(waiter)
        return waiter.answer  # settled: once closed, no answer is handed to this waiter any more

    def on_peer_queued(self, agent_id: str) -> None:
        """Another process queued a message for this agent: if its ask is blocked here, look now."""
        with self._lock:
            waiter = self._waiters.get(agent_id)
        if waiter is not None and not waiter.event.is_set():
            self._take_queued_answer(waiter)

    def _take_queued_answer(self, waiter: AskWaiter) -> None:
        for row in queue.list_queued(self._db, waiter.agent_id):
            queued = PendingMessage.from_row(row)
            if waiter.matches(queued) and self._resolve(waiter, queued):
                return

    def end_ask(self, waiter: AskWaiter) -> None:
        with self._lock:
            waiter.closed = True
            if self._waiters.get(waiter.agent_id) is waiter:
                del self._waiters[waiter.agent_id]

    def waiting_for_user(self, agent_ids: list[str]) -> list[AskWaiter]:
        """The blocked ask_user calls of these agents in this process, oldest first."""
        with self._lock:
            waiters = [w for a in agent_ids if (w := self._waiters.get(a)) and w.from_user]
        return sorted(waiters, key=lambda w: w.since)

    def take(self, message_id: str, consumed_by: str) -> PendingMessage | None:
        """Consume one queued message by compare-and-set (None when someone else took it)."""
        with self._db.write() as s:
            row = queue.take_in(s, message_id, consumed_by=consumed_by)
            return PendingMessage.from_row(row) if row is not None else None

    def _resolve(self, waiter: AskWaiter, message: PendingMessage) -> bool:
        """Hand the message to the blocked call: taken from the queue by compare-and-set, so once.

        The ask may end (timeout, stop) while its answer is being taken; then the message goes back to
        the queue, where the agent's next drain (or turn) finds it, and the caller delivers it as usual."""
        consumed_by = f"ask:{waiter.question_id}"
        with self._db.write() as s:
            taken = queue.take_in(s, message.id, consumed_by=consumed_by)
        if taken is None:
            return False
        with self._lock:
            if not waiter.closed:
                waiter.answer = message
                waiter.event.set()
                return True
        with self._db.write() as s:
            queue.requeue_in(s, message.id, consumed_by=consumed_by)
        # Delivered afresh by the receiver's state now: its turn may have ended meanwhile, with nothing
        # queued at its end-of-turn check, or a new ask may be waiting for exactly this.
        return self.deliver(message).delivery == RESOLVED

"""Sub-agents: their rows, display names, completion notices and termination.

A sub-agent is an agent row with its own history and queue; its turns run
like any agent's. Its task reaches it as its first queued message, and each
turn it finishes on its own is reported to its parent as a completion notice
through the parent's queue (the notification pool is one consumer of the
router's queues, not a second mechanism).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.exc import IntegrityError

from modules.agents.profiles import SUB_AGENT_KIND, AgentProfile
from modules.multi_agent import agent_state
from modules.multi_agent.message_router import PendingMessage
from modules.notice_fence import fenced
from modules.statuses import BUSY_AGENT_STATES, MessageSource, TaskStatus, Visibility
from modules.storage import agents as agent_store
from modules.storage import pending_messages as queue
from modules.storage.db import Database
from modules.storage.message_meta import MessageMeta
from modules.storage.models import Agent
from modules.storage.records import new_id, now
from modules.work_caps import CapReached, WorkCaps, check, starting

SUMMARY_CHARS = 3_000


class SubAgentError(ValueError):
    """A sub-agent request that cannot be honoured; the message says why."""


@dataclass(frozen=True)
class TurnResult:
    """How one turn of an agent ended, as its parent learns it."""

    task_id: str
    status: str
    final_text: str
    error: str | None
    duration_s: float


def _build_sub_agent_notice_text(display_name: str, result: TurnResult) -> str:
    summary = result.final_text.strip() or "(no final answer)"
    if len(summary) > SUMMARY_CHARS:
        summary = summary[:SUMMARY_CHARS] + "… (truncated)"
    head = f"[Sub-agent {display_name} {result.status} in {result.duration_s:.1f} s]"
    if result.error:
        head += f" Error: {result.error}"
    report = fenced(f"result of sub-agent {display_name}", f"Result:\n{summary}")
    return f"{head}\n{report}"


class SubAgentManager:
    def __init__(self, db: Database, profiles: dict[str, AgentProfile], caps: WorkCaps | None = None):
        self._db = db
        self._profiles = profiles
        self._caps = caps  # None: no cap (the server always passes the configured ones)

    def roles(self) -> list[str]:
        return [p.name for p in self._profiles.values() if p.kind == SUB_AGENT_KIND]

    def create_sub_agent(self, parent: Agent, role: str, task: str) -> Agent:
        """A new idle sub-agent named `{role}_{n}`, numbered in the order of the calls; SubAgentError when the
        role is unknown or the caps on active sub-agents are reached (modules/work_caps.py)."""
        profile = self._profiles.get(role)
        if profile is None or profile.kind != SUB_AGENT_KIND:
            raise SubAgentError(f"unknown role {role!r}; available roles: {', '.join(self.roles()) or 'none'}")
        if self._caps is None:
            return self._insert(parent, role, task)
        with starting(self._db, parent.conversation_id):
            try:
                check(self._db, self._caps.sub_agents, parent.conversation_id)
            except CapReached as exc:
                raise SubAgentError(str(exc)) from None
            return self._insert(parent, role, task)

    def _insert(self, parent: Agent, role: str, task: str) -> Agent:
        for _ in range(5):
            count = agent_store.count_with_role(self._db, parent.conversation_id, role)
            ts = now()
            agent = Agent(id=new_id(), conversation_id=parent.conversation_id, display_name=f"{role}_{count + 1}",
                          role=role, kind=SUB_AGENT_KIND, parent_id=parent.id, state=agent_state.IDLE, version=0,
                          task=task, terminated=False, created_at=ts, updated_at=ts)
            try:
                agent_store.insert_agent(self._db, agent)
                return agent
            except IntegrityError:
                continue  # another call took this number; count again
        raise SubAgentError("could not allocate a display name; try again")

    def completion_notice(self, agent: Agent, result: TurnResult) -> PendingMessage:
        """The notice of a sub-agent's finished turn, for its parent."""
        if agent.parent_id is None:
            raise SubAgentError(f"{agent.display_name} has no parent to notify")
        return PendingMessage.new(
            id=f"done-{result.task_id}", conversation_id=agent.conversation_id, target_agent_id=agent.parent_id,
            type="notice", content=_build_sub_agent_notice_text(agent.display_name, result),
            source_display_name=agent.display_name, source_agent_id=agent.id,
            meta=MessageMeta(source=MessageSource.SUB_AGENT, visibility=Visibility.COMPACT,
                             auto_message_type="sub_agent", sub_agent_notice=True, sub_agent_id=agent.id,
                             status=TaskStatus(result.status), finished_at=now()),
        )

    def in_conversation(self, conversation_id: str) -> list[Agent]:
        return agent_store.list_of_kind(self._db, conversation_id, SUB_AGENT_KIND)

    def has_running_children(self, parent_id: str) -> bool:
        return agent_store.has_child_in_states(self._db, parent_id, BUSY_AGENT_STATES)

    def poll_updates(self, conversation_id: str) -> list[PendingMessage]:
        """Finished sub-agent runs whose notice is not delivered yet, in finish order."""
        notices = queue.queued_notices(self._db, conversation_id, MessageSource.SUB_AGENT)
        return [PendingMessage.from_row(r) for r in notices]

    def mark_terminated(self, agent_id: str) -> bool:
        """Terminate a sub-agent; what waits in its queue is discarded with it (it takes no more turns)."""
        with self._db.write() as s:
            won = agent_store.mark_terminated_in(s, agent_id, SUB_AGENT_KIND)
            if won:
                queue.discard_in(s, agent_id, "terminated")
            return won

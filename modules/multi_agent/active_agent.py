"""The active-agent fast path (docs/ARCHITECTURE.md, "Where is the fast path decided"): who last answered the
user, per conversation, by id (`ActiveAgentSessionStore`), and whether a message goes straight to that agent
(`ActiveAgentFastPath.decide`, with the rules of modules/multi_agent/follow_up.py and the team's domain terms of
modules/multi_agent/domain_vocabulary.py)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy.orm import Session

from modules.agents.profiles import MASTER_KIND, SUB_AGENT_KIND
from modules.multi_agent.domain_vocabulary import TeamVocabulary
from modules.multi_agent.fast_path import RoutingSignals
from modules.multi_agent.follow_up import Verdict
from modules.multi_agent.follow_up_model import decide
from modules.storage import messages as message_store
from modules.storage import tasks as task_store
from modules.storage.db import Database
from modules.storage.group_commit import GroupCommit
from modules.storage.models import Agent
from modules.storage.session_store import SessionStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Active:
    """Who reasoned last in a conversation: an agent, by id (a renamed agent stays active), or a routing stage,
    by name (it is no agent: never a fast-path target)."""

    agent_id: str | None = None
    stage: str | None = None


class ActiveAgentSessionStore:
    """Who last reasoned for the user, per conversation, in the shared session store.

    Key `{conversation_id}:router`, field `activeAgent`: `{"agentId": ...}` for an agent, `{"stage": ...}` for a
    routing stage; kept in the database so every server process sees it. Any other value (a record of an earlier
    version, by display name) and any failure read as "no active agent" (the caller then takes the full pipeline);
    a failure is logged, never raised. With a `writer`, a write is a step of the group commit's batches (every
    routed message and every user turn writes it: a commit of its own each, on the lock the batches wait for).
    """

    FIELD = "activeAgent"

    def __init__(self, store: SessionStore, writer: GroupCommit | None = None):
        self._store, self._writer = store, writer

    @staticmethod
    def key(conversation_id: str) -> str:
        return f"{conversation_id}:router"

    def get(self, conversation_id: str) -> Active:
        try:
            value = self._store.get(self.key(conversation_id), self.FIELD)
        except Exception as exc:
            log.warning("session store unreadable, taking the full pipeline: %s", exc)
            return Active()
        if not isinstance(value, dict):
            return Active()
        agent_id, stage = value.get("agentId"), value.get("stage")
        return Active(agent_id if isinstance(agent_id, str) else None, stage if isinstance(stage, str) else None)

    def get_active_agent(self, conversation_id: str) -> str | None:
        """The id of the agent that last answered the user, None when a routing stage reasoned since."""
        return self.get(conversation_id).agent_id

    def get_active_stage(self, conversation_id: str) -> str | None:
        return self.get(conversation_id).stage

    def set_active_agent(self, conversation_id: str, agent_id: str) -> None:
        self._set(conversation_id, {"agentId": agent_id}, f"agent {agent_id}")

    def set_active_agent_in(self, session: Session, conversation_id: str, agent_id: str) -> None:
        """`set_active_agent` inside the caller's transaction (the routing inbox's record of a delivery): a
        failing store leaves the caller's writes alone."""
        self._store.set_in(session, self.key(conversation_id), self.FIELD, {"agentId": agent_id})

    def set_active_stage(self, conversation_id: str, stage: str) -> None:
        self._set(conversation_id, {"stage": stage}, f"stage {stage}")

    def _set(self, conversation_id: str, value: dict[str, str], what: str) -> None:
        key = self.key(conversation_id)
        try:
            if self._writer is not None:
                self._writer.call(lambda s: self._store.set_in(s, key, self.FIELD, value))
            else:
                self._store.set(key, self.FIELD, value)
        except Exception as exc:
            log.warning("could not record the active %s: %s", what, exc)


@dataclass(frozen=True)
class FastPath:
    """The fast path's answer for one user message: the active agent's id as stored, the agent it would go to
    (None: no active agent the fast path can reach) and the verdict on it."""

    active: str | None
    target: Agent | None
    verdict: Verdict | None

    @property
    def taken(self) -> bool:
        return self.target is not None and self.verdict is not None and self.verdict.continues

    @property
    def reason(self) -> str:
        return self.verdict.reason if self.verdict is not None else "no active agent"


class ActiveAgentFastPath:
    """Decides whether a user's message goes straight to the agent that reasoned last (`decide`), from the
    store of who that is (`store`), the rules of modules/multi_agent/follow_up.py and the team's domain terms
    (`vocabulary`, read from the profiles). A routing stage recorded as active is no agent: no target."""

    def __init__(self, db: Database, store: ActiveAgentSessionStore, signals: RoutingSignals,
                 vocabulary: TeamVocabulary):
        self._db, self.store, self._signals, self._vocabulary = db, store, signals, vocabulary

    def decide(self, conversation_id: str, agents: list[Agent], message: str, *,
               known: Active | None = None) -> FastPath:
        """`known`: the store's record as the caller has just read it (no second read)."""
        active = (known if known is not None else self.store.get(conversation_id)).agent_id
        target = next((a for a in agents if a.id == active and (
            a.kind == MASTER_KIND or (a.kind == SUB_AGENT_KIND and not a.terminated))), None)
        return FastPath(active, target, self.verdict(target, message) if target is not None else None)

    def verdict(self, target: Agent, message: str) -> Verdict:
        """The fast path's rules for `message` against what `target` (the active agent) last said."""
        reply = message_store.last_reply(self._db, target.id)
        offered = task_store.offered_suggestions(self._db, reply.task_id, reply.message_id) \
            if reply is not None and reply.task_id else []
        return decide(self._signals, message, reply.text if reply else None, self._vocabulary.view(target.role),
                     tuple(offered))

"""The active-agent fast path (docs/ARCHITECTURE.md, "Where is the fast path decided"): who last answered the
user, per conversation (`ActiveAgentSessionStore`), and whether a message goes straight to that agent
(`ActiveAgentFastPath.decide`, with the rules of modules/multi_agent/follow_up.py and the team's domain terms of
modules/multi_agent/domain_vocabulary.py)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from modules.agents.profiles import MASTER_KIND, SUB_AGENT_KIND
from modules.multi_agent.domain_vocabulary import TeamVocabulary
from modules.multi_agent.fast_path import RoutingSignals
from modules.multi_agent.follow_up import Verdict
from modules.multi_agent.follow_up_model import decide
from modules.storage import messages as message_store
from modules.storage import tasks as task_store
from modules.storage.db import Database
from modules.storage.models import Agent
from modules.storage.session_store import SessionStore

log = logging.getLogger(__name__)


class ActiveAgentSessionStore:
    """The agent that last answered the user, per conversation, in the shared session store.

    Key `{conversation_id}:router`, field `activeAgent`, kept in the database so
    every server process sees it. Any failure reads as "no active agent" (the
    caller then takes the full pipeline) and is logged, never raised.
    """

    FIELD = "activeAgent"

    def __init__(self, store: SessionStore):
        self._store = store

    @staticmethod
    def key(conversation_id: str) -> str:
        return f"{conversation_id}:router"

    def get_active_agent(self, conversation_id: str) -> str | None:
        try:
            value = self._store.get(self.key(conversation_id), self.FIELD)
        except Exception as exc:
            log.warning("session store unreadable, taking the full pipeline: %s", exc)
            return None
        return value.get("agentName") if isinstance(value, dict) else None

    def set_active_agent(self, conversation_id: str, agent_name: str) -> None:
        try:
            self._store.set(self.key(conversation_id), self.FIELD, {"agentName": agent_name})
        except Exception as exc:
            log.warning("could not record the active agent %s: %s", agent_name, exc)


@dataclass(frozen=True)
class FastPath:
    """The fast path's answer for one user message: the active agent it would go to (None: no active agent
    the fast path can reach) and the rules' verdict on it."""

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
    (`vocabulary`, read from the profiles). `stages` are the names of routing stages that may be recorded as
    active: they are no agent, so never a fast-path target."""

    def __init__(self, db: Database, store: ActiveAgentSessionStore, signals: RoutingSignals,
                 vocabulary: TeamVocabulary, stages: tuple[str, ...]):
        self._db, self.store, self._signals, self._vocabulary, self._stages = db, store, signals, vocabulary, stages

    def decide(self, conversation_id: str, agents: list[Agent], message: str) -> FastPath:
        active = self.store.get_active_agent(conversation_id)
        target = None
        if active and active not in self._stages:
            master = next(a for a in agents if a.kind == MASTER_KIND)
            target = master if active == master.display_name else next(
                (a for a in agents if a.display_name == active and a.kind == SUB_AGENT_KIND and not a.terminated), None)
        return FastPath(active, target, self.verdict(target, message) if target is not None else None)

    def verdict(self, target: Agent, message: str) -> Verdict:
        """The fast path's rules for `message` against what `target` (the active agent) last said."""
        reply = message_store.last_reply(self._db, target.id)
        offered = task_store.offered_suggestions(self._db, reply.task_id, reply.message_id) \
            if reply is not None and reply.task_id else []
        return decide(self._signals, message, reply.text if reply else None, self._vocabulary.view(target.role),
                     tuple(offered))

"""Where a user's message goes (docs/ARCHITECTURE.md), decided at the top of every message, in order:

1. an agent of the conversation waits in `ask_user`: the message answers it (`hil`);
2. an active agent is recorded and the fast path (`ActiveAgentFastPath.decide` in
   modules/multi_agent/active_agent.py, with the rules of `follow_up.judge`) says the message goes on with
   it (a continuation, or a follow-up tied to what that agent last said): straight to it (`fast_path`);
   a business sub-agent directly, the master without routing stages; an active intent stage is
   re-run on a continuation then dispatched; an active rewriting or routing stage means the full
   pipeline;
3. otherwise the pipeline: one combined routing request naming the active agent (rewrite and intent
   in one answer), or with `ROUTING_STAGES=separate` query rewriting then intent recognition; then
   the master or a business sub-agent (the active one when its role is chosen, else reused or created).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from modules.agents.profiles import MASTER_KIND, SUB_AGENT_KIND
from modules.multi_agent import agent_state
from modules.multi_agent.pipeline import INTENT, REWRITER, recognize_intent, rewrite_query
from modules.multi_agent.routing_stage import ROUTER, route_in_one_request
from modules.multi_agent.user_questions import OpenQuestion, StaleQuestion
from modules.statuses import Route
from modules.storage import messages as message_store
from modules.storage.models import Agent, Conversation
from modules.sub_agent.manager import SubAgentError
from modules.usage import records as usage
from modules.usage.metered_model import BoundChatModel
from server.runtime import Runtime

log = logging.getLogger(__name__)

HIL, FAST_PATH, PIPELINE = Route.HIL, Route.FAST_PATH, Route.PIPELINE


@dataclass(frozen=True)
class RouteDecision:
    route: Route
    target: Agent
    question_id: str | None = None
    rewritten: str | None = None
    reason: str | None = None  # why the fast path was taken, or why not


class UserMessageRouting:
    def __init__(self, rt: Runtime):
        self._rt = rt

    def decide(self, conv: Conversation, agents: list[Agent], message: str,
               question_id: str | None) -> RouteDecision:
        rt = self._rt
        open_questions = self._open_questions(conv, agents)
        if open_questions:
            chosen = open_questions[0]
            if question_id:
                asked = next((q for q in open_questions if q.question_id == question_id), None)
                if asked is None:
                    raise StaleQuestion(question_id, [q.question_id for q in open_questions])
                chosen = asked
            target = next(a for a in agents if a.id == chosen.agent_id)
            return RouteDecision(HIL, target, chosen.question_id)
        if question_id:
            raise StaleQuestion(question_id, [])
        master = next(a for a in agents if a.kind == MASTER_KIND)
        active = rt.active_agents.get(conv.id)  # one read: the active stage here, the active agent below
        if active.stage == INTENT and rt.signals.is_continuation(message):
            return RouteDecision(FAST_PATH, self._dispatch(conv, agents, master, self._intent(conv, message)),
                                 reason="continuation")
        fast = rt.fast_path.decide(conv.id, agents, message, known=active)  # modules/multi_agent/active_agent.py
        if fast.taken and fast.target is not None:  # taken implies a target
            return RouteDecision(FAST_PATH, fast.target, reason=fast.reason)
        decision = self._pipeline(conv, agents, master, message, fast.target)
        return RouteDecision(decision.route, decision.target, rewritten=decision.rewritten, reason=fast.reason)

    def check_question(self, conv: Conversation, agents: list[Agent], question_id: str) -> None:
        """`StaleQuestion` at once when the question a send names is not pending."""
        open_ids = [q.question_id for q in self._open_questions(conv, agents)]
        if question_id not in open_ids:
            raise StaleQuestion(question_id, open_ids)

    def _open_questions(self, conv: Conversation, agents: list[Agent]) -> list[OpenQuestion]:
        """ask_user calls blocked in this process, then those recorded by others (their agent waiting)."""
        found = {w.question_id: OpenQuestion(w.agent_id, w.question_id, w.since)
                 for w in self._rt.router.waiting_for_user([a.id for a in agents])}
        waiting = {a.id for a in agents if a.state == agent_state.WAITING}
        if not waiting:  # a recorded question counts only while its agent waits: no read when none does
            return sorted(found.values(), key=lambda q: q.asked_at)
        for q in self._rt.user_questions.list(conv.id):
            if q.question_id not in found and q.agent_id in waiting:
                found[q.question_id] = q
        return sorted(found.values(), key=lambda q: q.asked_at)

    def _pipeline(self, conv: Conversation, agents: list[Agent], master: Agent, message: str,
                  active: Agent | None) -> RouteDecision:
        rt = self._rt
        history = [(m.role, m.content or "") for m in message_store.recent_chat(rt.db, conv.id)]

        def record(name: str) -> None:
            rt.active_agents.set_active_stage(conv.id, name)

        if rt.settings.routing_stages == "combined":
            named = f"{active.role} ({active.display_name})" if active is not None else None
            route = route_in_one_request(self._model(conv, usage.ROUTING, ROUTER),
                                         rt.settings.stage_model("intent") or None, rt.profiles, history,
                                         message, named, rt.master.name, record)
            query, role = route.query, route.agent
        else:
            query = rewrite_query(self._model(conv, usage.REWRITE, REWRITER),
                                  rt.settings.stage_model("rewrite") or None, history, message, record)
            role = self._intent(conv, query)
        if active is not None and active.role == role:
            target = active
        else:
            target = self._dispatch(conv, agents, master, role)
        return RouteDecision(PIPELINE, target, rewritten=query if query != message else None)

    def _intent(self, conv: Conversation, query: str) -> str:
        rt = self._rt
        return recognize_intent(self._model(conv, usage.INTENT, INTENT), rt.settings.stage_model("intent") or None,
                                rt.profiles, query, rt.master.name,
                                lambda name: rt.active_agents.set_active_stage(conv.id, name))

    def _model(self, conv: Conversation, purpose: str, stage: str) -> BoundChatModel:
        """The model, metered for this conversation's routing stage."""
        return self._rt.model.bound(usage.CallContext(purpose, conv.id, conv.user_id, agent=stage))

    def _dispatch(self, conv: Conversation, agents: list[Agent], master: Agent, role: str) -> Agent:
        """The master, or the newest live sub-agent of the role (created when there is none)."""
        if role == master.role:
            return master
        live = [a for a in agents if a.role == role and a.kind == SUB_AGENT_KIND and not a.terminated]
        if live:
            return live[-1]
        try:
            return self._rt.sub_agents.create_sub_agent(master, role, "Help the user directly with their requests.")
        except SubAgentError as exc:
            log.warning("cannot start a %s for the user, the master answers instead: %s", role, exc)
            return master

"""Tools through which agents work together (API.md): sub-agents, messages, blocking asks.

Every exchange goes through the router, so the receiver's state decides how a
message lands; an ask blocks its caller (state `waiting`) until the matching
answer, a message from the agent asked, the timeout, or a stop.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from pydantic import Field

from modules.event_catalogue import AskUserEvent, RouteEvent, UserMessageEvent
from modules.multi_agent import agent_state
from modules.multi_agent.message_router import PendingMessage, RouteError
from modules.multi_agent.user_questions import OpenQuestion
from modules.statuses import Delivery, MessageSource, Route, Visibility
from modules.storage import agents as agent_store
from modules.storage import pending_messages as queue
from modules.storage import tasks as task_store
from modules.storage.db import Database
from modules.storage.message_meta import MessageMeta
from modules.storage.models import Agent
from modules.sub_agent.manager import SubAgentError
from modules.tools.base import NonBlank, ToolArguments, ToolContext, ToolSpec


def _error(message: str, **extra: Any) -> dict[str, Any]:
    return {"success": False, "error": message, **extra}


def _agent_named(ctx: ToolContext, display_name: str) -> Agent | None:
    agent = agent_store.find_agent(ctx.require_services().db, ctx.conversation_id, display_name)
    return agent if agent is not None and agent.display_name == display_name else None


def _message(ctx: ToolContext, target: Agent, type_: str, content: str, *,
             source: MessageSource = MessageSource.AGENT_MESSAGE,
             question_id: str | None = None) -> PendingMessage:
    return PendingMessage.new(
        conversation_id=ctx.conversation_id, target_agent_id=target.id, type=type_, content=content,
        source_display_name=ctx.agent_display_name, source_agent_id=ctx.agent_id, question_id=question_id,
        meta=MessageMeta(source=source, visibility=Visibility.CHAT),
    )


# -- master tools ----------------------------------------------------------
def _create_sub_agent(ctx: ToolContext, args: CreateSubAgentArguments) -> dict[str, Any]:
    svc = ctx.require_services()
    task = args.task
    parent = agent_store.get_agent(svc.db, ctx.agent_id)
    if parent is None:
        return _error("the calling agent is gone")
    try:
        agent = svc.sub_agents.create_sub_agent(parent, args.role, task)
    except SubAgentError as exc:
        return _error(str(exc))
    background = args.run_in_background
    waiter = None if background else svc.expect_turn(agent.id)
    try:
        svc.router.route_message(agent.id, _message(ctx, agent, "task", task))
    except Exception:
        if waiter is not None:
            waiter.cancel()
        raise
    base = {"display_name": agent.display_name, "agent_id": agent.id, "role": agent.role}
    if waiter is None:
        return {"success": True, **base, "status": "running in the background",
                "note": "You will receive a notice when it finishes; do not report its result before that."}
    asked: list[PendingMessage] = []

    def interrupted() -> bool:
        """A question from the awaited sub-agent ends the wait: we could not answer it while blocked."""
        if ctx.should_stop():
            return True
        for row in queue.list_queued(svc.db, ctx.agent_id):
            if row.type == "ask" and row.source_agent_id == agent.id:
                taken = svc.router.take(row.id, consumed_by=ctx.task_id or "create_sub_agent")
                if taken is not None:
                    asked.append(taken)
                    return True
        return False

    result = waiter.wait(svc.settings.sub_agent_timeout_s, interrupted)
    if asked:
        return {"success": True, **base, "status": "asking", "question_id": asked[0].question_id,
                "question": asked[0].content,
                "note": "The sub-agent waits for your answer: call answer_sub_agent_question. Its final answer "
                        "will arrive later as a notice."}
    if result is None:
        return _error("stopped or timed out while waiting; the sub-agent goes on in the background and "
                      "you will receive a notice when it finishes", **base)
    return {"success": result.status == task_store.SUCCEEDED, **base, "status": result.status,
            "answer": result.final_text, "duration_s": round(result.duration_s, 2),
            **({"error": result.error} if result.error else {})}


def _send_message_to_sub_agent(ctx: ToolContext, args: SendMessageArguments) -> dict[str, Any]:
    svc = ctx.require_services()
    target = _agent_named(ctx, args.display_name)
    if target is None or target.parent_id != ctx.agent_id:
        return _error(f"no sub-agent named {args.display_name!r} in this conversation")
    try:
        routed = svc.router.route_message(target.id, _message(ctx, target, "message", args.message,
                                                              source=MessageSource.GUIDANCE))
    except RouteError as exc:
        return _error(str(exc))
    return {"success": True, "display_name": target.display_name, "delivery": routed.delivery}


def _answer(ctx: ToolContext, question_id: str, answer: str) -> dict[str, Any]:
    """Answer a question that was asked of the calling agent; the asker is found by the question id."""
    svc = ctx.require_services()
    ask = queue.find_question(svc.db, question_id)
    if ask is None or ask.conversation_id != ctx.conversation_id:
        return _error(f"no question {question_id!r}")
    if ask.target_agent_id != ctx.agent_id:
        return _error(f"question {question_id} was not asked of you")
    asker = agent_store.get_agent(svc.db, ask.source_agent_id) if ask.source_agent_id else None
    if asker is None:
        return _error(f"the asker of question {question_id} is gone")
    try:
        routed = svc.router.route_message(asker.id, _message(ctx, asker, "answer", answer, question_id=question_id))
    except RouteError as exc:
        return _error(str(exc))
    return {"success": True, "question_id": question_id, "to": asker.display_name, "delivery": routed.delivery}


def _answer_sub_agent_question(ctx: ToolContext, args: AnswerArguments) -> dict[str, Any]:
    return _answer(ctx, args.question_id, args.answer)


def _terminate_sub_agent(ctx: ToolContext, args: DisplayNameArguments) -> dict[str, Any]:
    svc = ctx.require_services()
    target = _agent_named(ctx, args.display_name)
    if target is None or target.parent_id != ctx.agent_id:
        return _error(f"no sub-agent named {args.display_name!r} in this conversation")
    if not svc.sub_agents.mark_terminated(target.id):
        return _error(f"{target.display_name} is already terminated")
    svc.terminate_agent(target.id)
    return {"success": True, "display_name": target.display_name, "status": "terminated"}


# -- sub-agent tools ---------------------------------------------------------
class _Terminated:
    """Whether the agent asked was terminated: its queue, the question with it, was discarded, so no answer can
    come. A blocked ask's stop check calls it ten times a second; it reads the agent at most once a second."""

    def __init__(self, db: Database, agent_id: str):
        self._db, self._agent_id = db, agent_id
        self._next_read, self.seen = 0.0, False

    def __call__(self) -> bool:
        if not self.seen and time.monotonic() >= self._next_read:
            agent = agent_store.get_agent(self._db, self._agent_id)
            self.seen = agent is None or agent.terminated
            self._next_read = time.monotonic() + 1.0
        return self.seen


def _blocking_ask(ctx: ToolContext, target: Agent, question: str) -> dict[str, Any]:
    svc = ctx.require_services()
    question_id = f"q_{uuid.uuid4().hex[:12]}"
    waiter = svc.router.begin_ask(ctx.agent_id, question_id, target.id)
    terminated = _Terminated(svc.db, target.id)
    try:
        svc.states.transition(ctx.agent_id, agent_state.WAITING)
        try:
            svc.router.route_message(target.id, _message(ctx, target, "ask", question, question_id=question_id))
        except RouteError as exc:
            return _error(str(exc), question_id=question_id)
        answer = svc.router.wait_for_answer(waiter, svc.settings.ask_timeout_s,
                                            lambda: ctx.should_stop() or terminated())
    finally:
        svc.router.end_ask(waiter)
        svc.states.transition(ctx.agent_id, agent_state.RUNNING)
    if answer is not None and answer.type == "ask":
        # The agent we asked asked us back instead of answering: hand over its question so we can answer it.
        return {"success": True, "question_id": question_id, "answer": None, "from": answer.source_display_name,
                "their_question": answer.content, "their_question_id": answer.question_id,
                "note": f"{answer.source_display_name} asked you this instead of answering; reply with "
                        f"answer_other_agent(question_id={answer.question_id!r}), then ask again if needed."}
    if answer is not None:
        return {"success": True, "question_id": question_id, "answer": answer.content,
                "from": answer.source_display_name}
    if ctx.should_stop():
        return _error("stopped by the user while waiting for the answer", question_id=question_id)
    if terminated.seen:
        return _error(f"{target.display_name} was terminated before it answered", question_id=question_id)
    return _error(f"no answer from {target.display_name} within {svc.settings.ask_timeout_s:g} s",
                  question_id=question_id)


def _ask_master(ctx: ToolContext, args: QuestionArguments) -> dict[str, Any]:
    svc = ctx.require_services()
    me = agent_store.get_agent(svc.db, ctx.agent_id)
    master = agent_store.get_agent(svc.db, me.parent_id) if me is not None and me.parent_id else None
    if master is None:
        return _error("you have no master to ask")
    return _blocking_ask(ctx, master, args.question)


def _ask_other_agent(ctx: ToolContext, args: AskOtherAgentArguments) -> dict[str, Any]:
    target = _agent_named(ctx, args.target_display_name)
    if target is None or target.id == ctx.agent_id:
        return _error(f"no other agent named {args.target_display_name!r} in this conversation")
    return _blocking_ask(ctx, target, args.question)


def _answer_other_agent(ctx: ToolContext, args: AnswerArguments) -> dict[str, Any]:
    return _answer(ctx, args.question_id, args.answer)


MAX_OPTIONS = 8


def _ask_user(ctx: ToolContext, args: AskUserArguments) -> dict[str, Any]:
    """Human in the loop: the user's next message, from any client, answers this (route `hil`)."""
    svc = ctx.require_services()
    question, options = args.question, args.options
    question_id = f"q_{uuid.uuid4().hex[:12]}"
    waiter = svc.router.begin_ask(ctx.agent_id, question_id, None, from_user=True)
    try:
        svc.user_questions.open(ctx.conversation_id, OpenQuestion(ctx.agent_id, question_id))
        svc.states.transition(ctx.agent_id, agent_state.WAITING)
        ctx.emit(AskUserEvent(question_id=question_id, question=question, options=options,
                              display_name=ctx.agent_display_name))
        answer = svc.router.wait_for_answer(waiter, svc.settings.ask_timeout_s, ctx.should_stop)
    finally:
        svc.router.end_ask(waiter)
        svc.user_questions.close(ctx.conversation_id, question_id)
        svc.states.transition(ctx.agent_id, agent_state.RUNNING)
    if answer is None:
        reason = "stopped by the user" if ctx.should_stop() else \
            f"the user did not answer within {svc.settings.ask_timeout_s:g} s"
        return _error(reason, question_id=question_id)
    ctx.emit(UserMessageEvent(message=answer.content, message_id=answer.id, source=MessageSource.USER,
                              visibility=Visibility.CHAT, starts_work=False,
                              metadata=MessageMeta(question_id=question_id, route=Route.HIL).event_metadata()))
    ctx.emit(RouteEvent(route=Route.HIL, delivery=Delivery.RESOLVED, target_agent=ctx.agent_display_name,
                        message_id=answer.id))
    return {"success": True, "question_id": question_id, "answer": answer.content}


# -- the arguments of each tool: its schema for the model and its check, in one definition -------------------
class CreateSubAgentArguments(ToolArguments):
    role: str = Field(description="Profile name of the sub-agent, e.g. InfoAgent.")
    task: NonBlank = Field(description="What the sub-agent should do.")
    run_in_background: bool = Field(True, description="Default true.")


class SendMessageArguments(ToolArguments):
    display_name: str
    message: str


class AnswerArguments(ToolArguments):
    question_id: str
    answer: str


class DisplayNameArguments(ToolArguments):
    display_name: str


class QuestionArguments(ToolArguments):
    question: NonBlank


class AskOtherAgentArguments(ToolArguments):
    target_display_name: str
    question: NonBlank


class AskUserArguments(ToolArguments):
    question: NonBlank
    options: list[NonBlank] = Field(default_factory=list, max_length=MAX_OPTIONS)


CREATE_SUB_AGENT = ToolSpec(
    "create_sub_agent",
    "Start a sub-agent of the given role on a task. In the background (default) it returns the sub-agent's "
    "display name at once and you get a notice when it finishes; with run_in_background=false it waits and "
    "returns the sub-agent's final answer.",
    CreateSubAgentArguments, _create_sub_agent,
)
SEND_MESSAGE_TO_SUB_AGENT = ToolSpec(
    "send_message_to_sub_agent",
    "Send guidance or a new task to one of your sub-agents; it sees it before its next step, or starts a new "
    "turn if it had finished.",
    SendMessageArguments, _send_message_to_sub_agent,
)
ANSWER_SUB_AGENT_QUESTION = ToolSpec(
    "answer_sub_agent_question", "Answer a question a sub-agent asked you (by its question_id).",
    AnswerArguments, _answer_sub_agent_question,
)
TERMINATE_SUB_AGENT = ToolSpec(
    "terminate_sub_agent", "Stop a sub-agent for good.", DisplayNameArguments, _terminate_sub_agent,
)
ASK_MASTER = ToolSpec(
    "ask_master", "Ask your master a question and wait for the answer.", QuestionArguments, _ask_master,
)
ASK_OTHER_AGENT = ToolSpec(
    "ask_other_agent", "Ask another agent of the team a question (by display name) and wait for the answer.",
    AskOtherAgentArguments, _ask_other_agent,
)
ANSWER_OTHER_AGENT = ToolSpec(
    "answer_other_agent", "Answer a question another agent asked you (by its question_id).",
    AnswerArguments, _answer_other_agent,
)
ASK_USER = ToolSpec(
    "ask_user", "Ask the user a question (optionally with answer options) and wait for the reply.",
    AskUserArguments, _ask_user,
)

AGENT_TOOLS = [ASK_USER, CREATE_SUB_AGENT, SEND_MESSAGE_TO_SUB_AGENT, ANSWER_SUB_AGENT_QUESTION, TERMINATE_SUB_AGENT,
               ASK_MASTER, ASK_OTHER_AGENT, ANSWER_OTHER_AGENT]

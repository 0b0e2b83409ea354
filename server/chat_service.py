"""Sending a user message: the one entry shared by `POST /api/tasks` and the socket's `send_message`.

The message is stored before the sender hears back and routed after (`routing_inbox`):
the acknowledgement never waits for a model. Once routed, the receiver's state decides
whether it answers a pending question (`hil`), goes inline into a running turn, or
starts a new one.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import overload

from sqlalchemy.exc import InterfaceError, OperationalError

from modules.domain_errors import Conflict, NotFound
from modules.keyed_locks import KeyedLocks
from modules.multi_agent.message_router import PendingMessage
from modules.statuses import SendStatus
from modules.storage import agents as agent_store
from modules.storage import client_requests
from modules.storage import conversations as conversation_store
from modules.storage.models import Conversation
from server import rate_limits
from server.api.request_models import DEFAULT_TITLE, SendMessageBody
from server.api.response_models import SendAccepted
from server.api.validation import wire
from server.budget_guard import refuse_over_budget
from server.routing_inbox import RoutingInbox
from server.runtime import Runtime
from server.user_routing import UserMessageRouting

log = logging.getLogger(__name__)

TITLE_CHARS = 60


def title_from(message: str) -> str:
    line = " ".join(message.split())
    return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1] + "…"


@overload
def _message_id(user_id: int, client_message_id: str) -> str: ...


@overload
def _message_id(user_id: int, client_message_id: str | None) -> str | None: ...


def _message_id(user_id: int, client_message_id: str | None) -> str | None:
    """A retried send (its first try crashed or failed after queueing) carries the same message id, so
    the queue stores it once; without a client_message_id every send is new."""
    if not client_message_id:
        return None
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"chat-server:user/{user_id}/client-message/{client_message_id}"))


def pending_answer(message_id: str, conversation_id: str) -> SendAccepted:
    """The acknowledgement: stored, not routed yet; the route follows as a `route` event."""
    return SendAccepted(message_id=message_id, conversation_id=conversation_id, status=SendStatus.ROUTING)


class ChatService:
    def __init__(self, rt: Runtime):
        self._rt = rt
        self._routing = UserMessageRouting(rt)
        self.inbox = RoutingInbox(rt, self._routing)
        # Sends to one conversation are stored one at a time, in order; the inbox routes them in that order.
        self._ordering = KeyedLocks[str]()  # one lock per conversation with a send in progress

    def send(self, user_id: int, req: SendMessageBody,
             on_conversation: Callable[[str], None] | None = None) -> SendAccepted:
        """Queue the validated message for its receiver; the answer both edges send (`POST /api/tasks` and
        the socket's `send_message` acknowledgement serialise it alike, `server.api.validation.wire`).

        A repeated `client_message_id` returns the first answer and stores nothing twice.
        `on_conversation` hears the conversation id before delivery (a socket joins its
        room then, so it misses no event). Past the user's rate limits: 429 `rate_limited`, nothing stored.
        """
        rate_limits.check(self._rt.rate_limiter, self._rt.settings, rate_limits.SENDS, user_id)
        if req.conversation_id is None:
            rate_limits.check(self._rt.rate_limiter, self._rt.settings, rate_limits.CONVERSATIONS, user_id)
        if req.client_message_id:
            previous = client_requests.reserve(self._rt.db, user_id, req.client_message_id)
            stored = self._rt.router.stored(_message_id(user_id, req.client_message_id)) \
                if previous == client_requests.IN_PROGRESS else None
            if stored is not None:  # its first try stored it and then lost the database: deliver, never copy
                return self._answer_stored(stored, on_conversation)
            if previous == client_requests.IN_PROGRESS:
                raise Conflict("duplicate_in_progress", "a send with this client_message_id is in progress")
            if previous is not None:
                return SendAccepted.model_validate(previous)
        try:
            answer = self._deliver(user_id, req, on_conversation)
        except Exception:
            if req.client_message_id:
                client_requests.release(self._rt.db, user_id, req.client_message_id)
            raise
        if req.client_message_id:
            try:
                client_requests.complete(self._rt.db, user_id, req.client_message_id, wire(answer))
            except (OperationalError, InterfaceError):  # the message is stored: its sender hears so
                log.warning("could not record the answer to client message %s", req.client_message_id)
        return answer

    def _conversation(self, user_id: int, req: SendMessageBody) -> tuple[Conversation, str]:
        """The conversation and its master's id (the held message is addressed to the master until routed)."""
        rt = self._rt
        if req.conversation_id is None:
            created, master = conversation_store.create_conversation(rt.db, user_id, title_from(req.message),
                                                                     rt.master.name)
            return created, master.id
        found = conversation_store.get_conversation_and_master(rt.db, req.conversation_id, user_id)
        if found is None:
            raise NotFound("conversation")
        return found  # touched with the held message, in its transaction (`RoutingInbox.hold`)

    def _deliver(self, user_id: int, req: SendMessageBody,
                 on_conversation: Callable[[str], None] | None) -> SendAccepted:
        rt = self._rt
        message_id = _message_id(user_id, req.client_message_id)
        earlier = rt.router.stored(message_id) if message_id is not None else None  # a new send: nothing to find
        if earlier is not None:
            return self._answer_stored(earlier, on_conversation)
        refuse_over_budget(self._rt.budgets, user_id)
        conv, master_id = self._conversation(user_id, req)
        rt.ledger.know(conv.id, conv.user_id)  # its turns' model requests are metered without reading it again
        if on_conversation is not None:
            on_conversation(conv.id)
        rt.suggestions.cancel(conv.id)
        if req.question_id:
            self._routing.check_question(conv, agent_store.list_agents(rt.db, conv.id), req.question_id)
        with self._ordering.held(conv.id):
            held = self.inbox.hold(conv, master_id, req.message, req.question_id, message_id, req.client_message_id,
                                   title=title_from(req.message) if conv.title == DEFAULT_TITLE else None)
        return pending_answer(held.id, conv.id)

    def _answer_stored(self, message: PendingMessage,
                       on_conversation: Callable[[str], None] | None) -> SendAccepted:
        """A retry whose first try stored the message and then died: route it if it is still held, else
        deliver it where it went (its conversation, its agent), never a second copy where routing might
        send it today."""
        if on_conversation is not None:
            on_conversation(message.conversation_id)
        if self.inbox.is_held(message.id):
            self.inbox.kick(message.conversation_id)
            return pending_answer(message.id, message.conversation_id)
        target = agent_store.get_agent(self._rt.db, message.target_agent_id)
        routed = self._rt.router.deliver(message)
        return SendAccepted(status=SendStatus.ROUTED, task_id=routed.task_id, conversation_id=message.conversation_id,
                            agent_id=message.target_agent_id, message_id=message.id, route=message.meta.route,
                            delivery=routed.delivery, target_agent=target.display_name if target else None)


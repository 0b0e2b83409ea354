"""What the router asks of the server around it, as one typed collaborator (docs/ARCHITECTURE.md, "The path
of a user message").

The router decides delivery by the receiver's state; starting a turn, naming the task in progress, knowing
whether more completions are on their way and telling other server processes are the server's. The defaults
serve a router alone (unit tests, benchmarks): nothing starts, no task runs, every wave may grow, no peers."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy.orm import Session


def _no_turn(agent_id: str) -> str | None:
    return None


def _more_may_come(agent_id: str) -> bool:
    return True


def _no_peers(agent_id: str) -> None:
    return None


class TurnClaims(Protocol):
    """Starting a turn inside the router's own transaction: a user's message released to an idle agent is queued,
    and the agent claimed with its turn's task, in one commit instead of two."""

    def claiming(self, task_id: str) -> AbstractContextManager[None]:
        """Around the transaction that may claim `task_id`, and its start: the task is this process's meanwhile."""
        ...

    def claim_in(self, session: Session, agent_id: str, task_id: str) -> Callable[[], str] | None:
        """Claim the agent (a message was queued for it in the caller's transaction) and write its task `task_id`;
        the start of its turn, to call once that commits (it returns the task id), or None when the agent has no
        turn to start. Database work only: it may run twice (group commit)."""
        ...


@dataclass(frozen=True)
class RouterHooks:
    """`wake`: start a turn for an idle agent, called right after a message for it was committed to its queue,
    returning its task id (None when none started); `active_task_of`: the id of the agent's task in progress;
    `more_completions_expected`: its commands or sub-agents still run, so a completion notice is worth holding
    back for the rest of its wave; `notify_peers`: tell the other server processes that a waiting agent has a
    queued message (its blocked ask may run there; they call `MessageRouter.on_peer_queued`); `claims`: how a
    released message's transaction also starts its idle receiver's turn (None: it wakes the receiver afterwards)."""

    wake: Callable[[str], str | None] = _no_turn
    active_task_of: Callable[[str], str | None] = _no_turn
    more_completions_expected: Callable[[str], bool] = _more_may_come
    notify_peers: Callable[[str], None] = _no_peers
    claims: TurnClaims | None = None

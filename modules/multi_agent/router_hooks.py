"""What the router asks of the server around it, as one typed collaborator (docs/ARCHITECTURE.md, "Routing").

The router decides delivery by the receiver's state; starting a turn, naming the task in progress, knowing
whether more completions are on their way and telling other server processes are the server's. The defaults
serve a router alone (unit tests, benchmarks): nothing starts, no task runs, every wave may grow, no peers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


def _no_turn(agent_id: str) -> str | None:
    return None


def _more_may_come(agent_id: str) -> bool:
    return True


def _no_peers(agent_id: str) -> None:
    return None


@dataclass(frozen=True)
class RouterHooks:
    """`wake`: start a turn for an idle agent, called right after a message for it was committed to its queue,
    returning its task id (None when none started); `active_task_of`: the id of the agent's task in progress;
    `more_completions_expected`: its commands or sub-agents still run, so a completion notice is worth holding
    back for the rest of its wave; `notify_peers`: tell the other server processes that a waiting agent has a
    queued message (its blocked ask may run there; they call `MessageRouter.on_peer_queued`)."""

    wake: Callable[[str], str | None] = _no_turn
    active_task_of: Callable[[str], str | None] = _no_turn
    more_completions_expected: Callable[[str], bool] = _more_may_come
    notify_peers: Callable[[str], None] = _no_peers

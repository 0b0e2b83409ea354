"""A RoutingInbox for unit tests: routing replaced by a record of what was routed."""

from __future__ import annotations

from types import SimpleNamespace

from modules.storage import unrouted
from server.routing_inbox import RoutingInbox


class Inbox(RoutingInbox):
    """Routing replaced by a record of what was routed; a task spawned runs at once (its sleep patched to 0)."""

    def __init__(self, db, spawn=lambda fn, *args: fn(*args)):
        super().__init__(SimpleNamespace(db=db, spawn=spawn), routing=None)
        self.routed: list[str] = []

    def _route(self, held):
        with self._rt.db.write() as s:
            unrouted.release_in(s, held.id, {"target_agent_id": held.target_agent_id, "type": held.type,
                                             "question_id": None, "meta": held.meta.dump()})
        self.routed.append(held.content)

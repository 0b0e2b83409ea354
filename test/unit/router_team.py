"""A team on a real router for the router's threaded tests (test_router_queue.py, test_router_asks.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

from modules.agents.profiles import load_profiles
from modules.multi_agent.agent_state import AgentStates
from modules.multi_agent.message_router import MessageRouter, PendingMessage
from modules.multi_agent.router_hooks import RouterHooks
from modules.statuses import Visibility
from modules.storage import conversations
from modules.storage import messages as message_store
from modules.storage.db import Database
from modules.storage.message_meta import MessageMeta
from modules.storage.users import get_or_create_user
from modules.sub_agent.manager import SubAgentManager
from modules.tools.agent_tools import AGENT_TOOLS
from modules.tools.run_command import RUN_COMMAND
from test.db_urls import fresh_database

DEADLINE_S = 60


def router_database(kind: str, tmp_path: Path) -> Iterator[Database]:
    with fresh_database(kind, tmp_path) as url:
        # Fifty threads on two busy cores may wait on the pool longer than the server's 5 s: these tests are
        # about exactly-once delivery, not about the bound (test_database_bounds covers that).
        database = Database(url, timeout_s=60)
        database.migrate()
        yield database
        database.dispose()


class Team:
    """A conversation with its master and `n` InfoAgent sub-agents, on a real router."""

    def __init__(self, db: Database, n: int, hooks: RouterHooks | None = None):
        self.db = db
        self.states = AgentStates(db)
        self.router = MessageRouter(db, hooks=hooks)
        user = get_or_create_user(db, "alice")
        self.conv, self.master = conversations.create_conversation(db, user.id, "router")
        profiles = load_profiles(None, {t.name for t in (RUN_COMMAND, *AGENT_TOOLS)})
        manager = SubAgentManager(db, profiles)
        self.subs = [manager.create_sub_agent(self.master, "InfoAgent", f"task {i}") for i in range(n)]

    def message(self, source, target, content: str, type_: str = "message", question_id: str | None = None,
                source_kind: str = "agent_message") -> PendingMessage:
        return PendingMessage.new(
            conversation_id=self.conv.id, target_agent_id=target.id, type=type_, content=content,
            source_display_name=source.display_name, source_agent_id=source.id, question_id=question_id,
            meta=MessageMeta(source=source_kind, visibility=Visibility.CHAT),
        )

    def user_history(self, agent) -> list:
        return [m for m in message_store.list_messages(self.db, agent.id) if m.role == "user"]


def run_threads(targets, timeout: float = DEADLINE_S) -> None:
    threads = [threading.Thread(target=t, daemon=True) for t in targets]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    assert not any(t.is_alive() for t in threads), "threads did not finish in time"

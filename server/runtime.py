"""The composition root: the services one server process runs with, all built here by one constructor, no member
filled in later (docs/ARCHITECTURE.md, "Layers"). The order follows the dependencies but for one pair that
needs each other: the router starts turns and turns use the router. The `TurnManager` comes first, given this
runtime while it is still half built (it reads the router, the commands and the agent services only once turns
run); the router then gets the manager's methods (`RouterHooks`). The turn package sees this object through its
`TurnRuntime` protocol and the loop through a `TurnLoop`, so it imports neither this module nor the loop files.
Building starts no thread (it registers the process in the database): `server.app.ChatServer.start` starts them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from modules.agents.profiles import AgentProfile, master_profile
from modules.agents.services import AgentServices
from modules.background_command_manager import BackgroundCommandManager
from modules.config import Settings
from modules.context.budget import RefusedSizes
from modules.foreground_commands import ForegroundCommands
from modules.llm import ChatModel
from modules.multi_agent.active_agent import ActiveAgentFastPath, ActiveAgentSessionStore
from modules.multi_agent.agent_state import AgentStates
from modules.multi_agent.domain_vocabulary import TeamVocabulary
from modules.multi_agent.fast_path import RoutingSignals
from modules.multi_agent.message_router import MessageRouter
from modules.multi_agent.router_hooks import RouterHooks
from modules.multi_agent.user_questions import UserQuestions
from modules.peer_signals import QUEUED, build_peer_signals
from modules.rate_limit import RateLimiter
from modules.storage.db import Database
from modules.storage.group_commit import GroupCommit
from modules.storage.pending_messages import queued_total
from modules.storage.session_store import SessionStore
from modules.sub_agent.manager import SubAgentManager
from modules.tools.disk_guard import open_workspace, remove_workspace
from modules.tools.registry import ToolRegistry
from modules.tools.sandbox import Sandbox
from modules.tracing import build_tracing
from modules.usage.budgets import Budgets, budgets_from
from modules.usage.ledger import UsageLedger
from modules.usage.metered_model import MeteredChatModel
from modules.usage.prices import load_prices
from modules.work_caps import WorkCaps
from server.chat_flow_task_main import collect_queue, handle_task_with_sender, poll_completion_notifications
from server.cluster import Membership
from server.metrics import Metrics
from server.sender import Transport
from server.suggestions import SuggestionService
from server.turns.context import TurnLoop
from server.turns.event_log import EventLog
from server.turns.manager import TurnManager


class Runtime:
    def __init__(self, *, settings: Settings, db: Database, model: ChatModel, tools: ToolRegistry,
                 profiles: dict[str, AgentProfile], sandbox: Sandbox, transport: Transport,
                 spawn: Callable[..., Any], signals: RoutingSignals):
        self.settings, self.db, self.tools, self.profiles = settings, db, tools, profiles
        self.sandbox, self.transport, self.spawn, self.signals = sandbox, transport, spawn, signals
        self.membership = Membership(db, poll_s=settings.peer_poll_s)
        self.peers = build_peer_signals(settings.redis_url, self.membership.process_id)
        self.rate_limiter = RateLimiter(settings.redis_url)
        # One per process: the events and sends of every task share its transactions.
        self.writer = GroupCommit(db, gather_s=settings.group_commit_gather_ms / 1000)
        # Every model request is metered here, in one place; its ledger rows ride the group commit.
        self.metrics = Metrics()
        self.metrics.watch_queue_depth(lambda: _or_nan(lambda: queued_total(db)))
        self.metrics.watch_database(db.statement_counts.statements, db.statement_counts.commits)
        self.ledger = UsageLedger(db, self.writer, listeners=(self.metrics.model_request,))
        sandbox.watchers.append(self.metrics.command_ended)
        self.tracing = build_tracing(settings.traces)
        self.model = MeteredChatModel(model, self.ledger, load_prices(settings.model_prices_path),
                                      settings.llm_model, self.tracing)
        self.budgets = Budgets(db, budgets_from(
            tokens_per_day=settings.budget_tokens_per_day, tokens_per_month=settings.budget_tokens_per_month,
            cost_per_day=settings.budget_cost_per_day, cost_per_month=settings.budget_cost_per_month),
            flush=self.ledger.flush)
        self.event_log = EventLog(db, flush_s=settings.stream_flush_ms / 1000,
                                  events_per_s=settings.stream_events_per_s, writer=self.writer, spawn=spawn)
        self.metrics.watch_chunk_wait(self.event_log.chunk_wait)
        self.agent_states = AgentStates(db)
        self.fast_path = ActiveAgentFastPath(db, ActiveAgentSessionStore(SessionStore(db), self.writer), signals,
                                             TeamVocabulary.of(profiles, signals))
        self.active_agents = self.fast_path.store
        self.user_questions = UserQuestions(SessionStore(db))
        caps = WorkCaps.of(settings)
        self.sub_agents = SubAgentManager(db, profiles, caps)
        # Half built here: the turn manager reads the router, the commands and the agent services only once
        # turns run; the router is built with the manager's methods, so it is complete from its first message.
        self.tasks = TurnManager(self, TurnLoop(run=handle_task_with_sender, poll=poll_completion_notifications,
                                                 collect=collect_queue))
        self.router = MessageRouter(
            db, spawn=spawn, settle_s=settings.notice_settle_ms / 1000, rescan_s=settings.peer_poll_s,
            hooks=RouterHooks(wake=self.tasks.wake, active_task_of=self.tasks.active_task_of_agent,
                              more_completions_expected=self.tasks.more_completions_expected,
                              notify_peers=lambda agent_id: self.peers.publish(QUEUED, agent_id),
                              claims=self.tasks),
            writer=self.writer)
        self.commands = BackgroundCommandManager(
            db, self.router, sandbox=sandbox, logs_dir=settings.data_dir / "command_logs",
            tail_chars=settings.command_output_tail_chars, spawn=spawn, log_max_bytes=settings.command_log_max_bytes,
            log_retention_s=settings.command_log_retention_days * 86400, owner=self.membership.process_id,
            peers=self.peers, caps=caps)
        self.services = AgentServices(
            db=db, settings=settings, router=self.router, states=self.agent_states, sub_agents=self.sub_agents,
            commands=self.commands, foreground=ForegroundCommands(db, caps, self.membership.process_id),
            profiles=profiles, user_questions=self.user_questions,
            expect_turn=self.tasks.expect_turn, terminate_agent=self.tasks.terminate_agent)
        self.suggestions = SuggestionService(self.model, settings, signals, self.event_log, transport, spawn)
        self.refused_sizes = RefusedSizes()  # what providers refused as too long (server/turns/context_window.py)

    @property
    def master(self) -> AgentProfile:
        return master_profile(self.profiles)

    def workspace(self, conversation_id: str, *, create: bool = True) -> Path:
        """The conversation's workspace folder, its own file system mounted where it has one (README, "Command
        sandbox"); with `create`, made if it does not exist yet."""
        return open_workspace(self.sandbox.disk, self.settings.workspaces_dir / conversation_id, create=create)

    def remove_workspace(self, conversation_id: str) -> None:
        remove_workspace(self.sandbox.disk, self.settings.workspaces_dir / conversation_id)

    def profile(self, role: str) -> AgentProfile:
        return self.profiles.get(role) or self.master


def _or_nan(read: Callable[[], int]) -> float:
    """A gauge read at scrape time: NaN while the database does not answer (the scrape still succeeds)."""
    try:
        return float(read())
    except Exception:
        return float("nan")

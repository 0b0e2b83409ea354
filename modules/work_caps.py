"""Caps on the work one conversation and one user may have running at once (README, "Configuration").

One step of a model could start a hundred background commands (each a sandbox of a few processes and
pipes) or sixty sub-agents, until the server ran out of file descriptors for everyone. Past a cap the
tool answers with an error that says which cap and how to go on, and nothing is started.

The check and the start happen under one lock per process; counts come from the database, so processes
see each other's work (two processes starting at the same instant may each pass once).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from modules.storage import work_counts
from modules.storage.db import Database


class CapReached(RuntimeError):
    """Starting more work would pass a cap; the message is the tool error."""


@dataclass(frozen=True)
class WorkCaps:
    commands_per_conversation: int = 32
    commands_per_user: int = 64
    sub_agents_per_conversation: int = 16
    sub_agents_per_user: int = 64


START_LOCK = threading.Lock()  # one check-and-start at a time in this process


def check_commands(db: Database, caps: WorkCaps, conversation_id: str) -> None:
    here, mine = work_counts.running_commands(db, conversation_id)
    if here >= caps.commands_per_conversation:
        raise CapReached(f"{here} background commands already run in this conversation, the most it may run at "
                         f"once (MAX_COMMANDS_PER_CONVERSATION); wait for their notices or cancel one first")
    if mine >= caps.commands_per_user:
        raise CapReached(f"{mine} background commands of this user already run, the most one user may run at "
                         f"once (MAX_COMMANDS_PER_USER); wait for their notices first")


def check_sub_agents(db: Database, caps: WorkCaps, conversation_id: str) -> None:
    here, mine = work_counts.active_sub_agents(db, conversation_id)
    if here >= caps.sub_agents_per_conversation:
        raise CapReached(f"{here} sub-agents are already active in this conversation, the most it may have at "
                         f"once (MAX_SUB_AGENTS_PER_CONVERSATION); wait for their reports or terminate one first")
    if mine >= caps.sub_agents_per_user:
        raise CapReached(f"{mine} sub-agents of this user are already active, the most one user may have at "
                         f"once (MAX_SUB_AGENTS_PER_USER); wait for their reports or terminate one first")

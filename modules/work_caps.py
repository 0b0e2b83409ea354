"""Caps on the work one conversation and one user may have running at once (README, "Configuration").

One step of a model could start a hundred background commands (each a sandbox of a few processes and
pipes) or sixty sub-agents, and a user with many conversations (or many sub-agents) a foreground command in
each at once, until the server ran out of file descriptors for everyone. Past a cap the
tool answers with an error that says which cap and how to go on, and nothing is started.

The counts come from the database, and the check and the insert of the new work happen under the user's
locks: this process's (`USER_LOCKS`), and the user's lock across every server process of the cluster
(modules/storage/work_lock.py), so two processes starting work at the same instant cannot both take the
last free place. Every cap is of a conversation or of its user, so different users' starts need not wait
on each other.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from modules.config import Settings
from modules.keyed_locks import KeyedLocks
from modules.storage import work_counts
from modules.storage.db import Database
from modules.storage.work_lock import owner_of, user_work_lock


class CapReached(RuntimeError):
    """Starting more work would pass a cap; the message is the tool error."""


@dataclass(frozen=True)
class Cap:
    """One kind of running work and its two caps, with the words of its tool error."""

    what: str  # "background commands"
    being: str  # what they are while they count: "running"
    per_conversation: int | None  # None: capped per user only
    per_user: int
    conversation_setting: str | None
    user_setting: str
    advice: str  # how to go on
    count: Callable[[Database, str], tuple[int, int]]  # (in the conversation, of its user)


@dataclass(frozen=True)
class WorkCaps:
    """The caps in force: built from the settings (`of`), whose declarations hold their defaults."""

    commands_per_conversation: int
    commands_per_user: int
    sub_agents_per_conversation: int
    sub_agents_per_user: int
    foreground_commands_per_user: int

    @classmethod
    def of(cls, settings: Settings) -> WorkCaps:
        return cls(commands_per_conversation=settings.max_commands_per_conversation,
                   commands_per_user=settings.max_commands_per_user,
                   sub_agents_per_conversation=settings.max_sub_agents_per_conversation,
                   sub_agents_per_user=settings.max_sub_agents_per_user,
                   foreground_commands_per_user=settings.max_foreground_commands_per_user)

    @property
    def commands(self) -> Cap:
        return Cap("background commands", "running", self.commands_per_conversation, self.commands_per_user,
                   "MAX_COMMANDS_PER_CONVERSATION", "MAX_COMMANDS_PER_USER",
                   "wait for their notices or cancel one first", work_counts.running_commands)

    @property
    def foreground_commands(self) -> Cap:
        """Per user only: a turn runs its tool calls one after another, so a conversation's foreground commands
        are bounded by its agents at work (MAX_SUB_AGENTS_PER_CONVERSATION)."""
        return Cap("foreground commands", "running", None, self.foreground_commands_per_user,
                   None, "MAX_FOREGROUND_COMMANDS_PER_USER", "wait for one of them to end, or run this one in the "
                   "background", work_counts.running_foreground_commands)

    @property
    def sub_agents(self) -> Cap:
        return Cap("sub-agents", "active", self.sub_agents_per_conversation, self.sub_agents_per_user,
                   "MAX_SUB_AGENTS_PER_CONVERSATION", "MAX_SUB_AGENTS_PER_USER",
                   "wait for their reports or terminate one first", work_counts.active_sub_agents)


# One lock per user in this process. The user's lock across processes excludes this process's other threads too
# on PostgreSQL and MariaDB (each holds a connection of its own), but not on SQLite, where it is nothing; and a
# start waiting here holds no connection.
USER_LOCKS: KeyedLocks[int | None] = KeyedLocks()
# Starts under way at once in this process: each holds a connection for the user's lock across processes and
# takes another for its count and its insert, so a burst of many users' starts must not take the whole pool.
STARTS_AT_ONCE = threading.BoundedSemaphore(4)


@contextmanager
def starting(db: Database, conversation_id: str) -> Iterator[None]:
    """Held while work is checked against its caps and recorded: nothing else of the user starts meanwhile,
    in this process or any other; other users' starts go on."""
    with USER_LOCKS.held(owner_of(db, conversation_id)), STARTS_AT_ONCE, user_work_lock(db, conversation_id):
        yield


def check(db: Database, cap: Cap, conversation_id: str) -> None:
    """CapReached when the conversation or its user already has as much of `cap`'s work as it allows."""
    here, mine = cap.count(db, conversation_id)
    if cap.per_conversation is not None and here >= cap.per_conversation:
        raise CapReached(f"{here} {cap.what} are already {cap.being} in this conversation, the most it may have at "
                         f"once ({cap.conversation_setting}); {cap.advice}")
    if mine >= cap.per_user:
        raise CapReached(f"{mine} {cap.what} of this user are already {cap.being}, the most one user may have at "
                         f"once ({cap.user_setting}); {cap.advice}")

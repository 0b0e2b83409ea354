"""The caps on running work are one check across processes (modules/work_caps.py, modules/storage/work_lock.py):
worker processes on one PostgreSQL (or MariaDB) database each check alice's cap and insert a running command,
with a pause between the check and the insert where another process could check too; together they insert
exactly the cap, and a process holding the user's lock makes another wait."""

from __future__ import annotations

import multiprocessing
import time

import pytest

from modules.config import Settings
from modules.statuses import CommandStatus
from modules.storage import commands as command_store
from modules.storage import work_counts
from modules.storage.conversations import create_conversation
from modules.storage.db import Database
from modules.storage.models import BackgroundCommand
from modules.storage.records import new_id, now
from modules.storage.users import get_or_create_user
from modules.storage.work_lock import user_work_lock
from modules.work_caps import CapReached, WorkCaps, check, starting
from test.db_urls import fresh_database

CAP = 3
WORKERS = 4
TRIES = 3


def _worker(url: str, conversation_id: str, agent_id: str, go: multiprocessing.Event) -> None:
    db = Database(url)
    caps = WorkCaps.of(Settings(max_commands_per_conversation=100, max_commands_per_user=CAP))
    go.wait(10)
    for _ in range(TRIES):
        try:
            with starting(db, conversation_id):
                check(db, caps.commands, conversation_id)
                time.sleep(0.05)  # the moment between the check and the insert
                command_store.insert_running(db, BackgroundCommand(
                    id=new_id(), conversation_id=conversation_id, agent_id=agent_id, command="sleep 1",
                    status=CommandStatus.RUNNING, timeout_s=1, log_path="/dev/null", created_at=now()))
        except CapReached:
            pass
    db.dispose()


@pytest.mark.parametrize("kind", ["postgresql", "mariadb"])
def test_processes_starting_one_users_work_at_once_pass_the_cap_together_never(tmp_path, kind):
    with fresh_database(kind, tmp_path) as url:
        db = Database(url)
        db.migrate()
        alice = get_or_create_user(db, "alice")
        conversations = [create_conversation(db, alice.id, f"c{i}") for i in range(WORKERS)]
        ctx = multiprocessing.get_context("spawn")
        go = ctx.Event()
        workers = [ctx.Process(target=_worker, args=(url, conv.id, master.id, go)) for conv, master in conversations]
        for worker in workers:
            worker.start()
        go.set()
        for worker in workers:
            worker.join(60)
            assert worker.exitcode == 0
        assert work_counts.running_commands(db, conversations[0][0].id)[1] == CAP
        db.dispose()


def _hold(url: str, conversation_id: str, held: multiprocessing.Event, release: multiprocessing.Event) -> None:
    db = Database(url)
    with user_work_lock(db, conversation_id):
        held.set()
        release.wait(10)
    db.dispose()


@pytest.mark.parametrize("kind", ["postgresql", "mariadb"])
def test_the_users_lock_held_by_one_process_makes_another_wait(tmp_path, kind):
    with fresh_database(kind, tmp_path) as url:
        db = Database(url)
        db.migrate()
        conv, _ = create_conversation(db, get_or_create_user(db, "alice").id, "c")
        other, _ = create_conversation(db, get_or_create_user(db, "bob").id, "c")
        ctx = multiprocessing.get_context("spawn")
        held, release = ctx.Event(), ctx.Event()
        holder = ctx.Process(target=_hold, args=(url, conv.id, held, release))
        holder.start()
        assert held.wait(30)
        with user_work_lock(db, other.id):
            pass  # bob's lock is his own
        asked_at = time.monotonic()
        releaser = ctx.Process(target=_release_after, args=(release, 0.5))
        releaser.start()
        with user_work_lock(db, conv.id):
            waited = time.monotonic() - asked_at
        holder.join(10)
        releaser.join(10)  # reaped here: no child is left for another to reap (`make mutate` waits for any)
        assert waited >= 0.4, waited
        db.dispose()


def _release_after(release: multiprocessing.Event, delay: float) -> None:
    time.sleep(delay)
    release.set()

"""The per-user cap on foreground commands (MAX_FOREGROUND_COMMANDS_PER_USER; modules/foreground_commands.py):
a command past it is refused and recorded nowhere, an ended command frees its place, another user has places of
his own, a dead process's commands stop counting once it is forgotten, processes (or threads of one process)
starting one user's commands at the same instant pass the cap together never, and another user's start does not
wait for one under way."""

from __future__ import annotations

import multiprocessing
import queue
import threading
import time
from contextlib import ExitStack

import pytest

from modules.config import Settings
from modules.foreground_commands import ForegroundCommands
from modules.storage import processes, work_counts
from modules.storage.conversations import create_conversation
from modules.storage.db import Database
from modules.storage.users import get_or_create_user
from modules.work_caps import CapReached, WorkCaps
from test.db_urls import fresh_database

CAP = 2


def caps(cap: int = CAP) -> WorkCaps:
    return WorkCaps.of(Settings(max_foreground_commands_per_user=cap))


@pytest.fixture
def db(tmp_path):
    database = Database(f"sqlite:///{tmp_path / 'app.db'}")
    database.migrate()
    yield database
    database.dispose()


def test_past_the_cap_a_foreground_command_is_refused_and_an_ended_one_frees_its_place(db):
    alice, bob = get_or_create_user(db, "alice").id, get_or_create_user(db, "bob").id
    convs = [create_conversation(db, alice, f"c{i}") for i in range(CAP + 1)]
    bobs, bobs_master = create_conversation(db, bob, "b")
    foreground = ForegroundCommands(db, caps(), processes.register(db))
    with ExitStack() as running:
        for conv, master in convs[:CAP]:
            running.enter_context(foreground.running(conv.id, master.id))
        conv, master = convs[CAP]
        with pytest.raises(CapReached, match="MAX_FOREGROUND_COMMANDS_PER_USER") as refused:
            running.enter_context(foreground.running(conv.id, master.id))
        assert f"{CAP} foreground commands of this user are already running" in str(refused.value)
        assert work_counts.running_foreground_commands(db, conv.id) == (0, CAP)  # the refused one is nowhere
        with foreground.running(bobs.id, bobs_master.id):  # bob has places of his own
            assert work_counts.running_foreground_commands(db, bobs.id) == (1, 1)
        running.close()  # the commands ended
        with foreground.running(conv.id, master.id):
            assert work_counts.running_foreground_commands(db, conv.id) == (1, 1)
    assert work_counts.running_foreground_commands(db, conv.id) == (0, 0)


def test_a_command_that_fails_still_frees_its_place(db):
    conv, master = create_conversation(db, get_or_create_user(db, "alice").id, "c")
    foreground = ForegroundCommands(db, caps(1), processes.register(db))
    with pytest.raises(OSError), foreground.running(conv.id, master.id):
        raise OSError("the sandbox did not start")
    with foreground.running(conv.id, master.id):
        pass


def test_the_commands_of_a_forgotten_process_stop_counting(db):
    conv, master = create_conversation(db, get_or_create_user(db, "alice").id, "c")
    dead = processes.register(db)
    held = ForegroundCommands(db, caps(), dead).running(conv.id, master.id)
    held.__enter__()  # the process died running it: the row stays behind
    assert work_counts.running_foreground_commands(db, conv.id) == (1, 1)
    processes.forget(db, {dead})
    assert work_counts.running_foreground_commands(db, conv.id) == (0, 0)
    held.__exit__(None, None, None)


def test_a_record_that_could_not_be_deleted_is_deleted_at_the_next_start(db, monkeypatch):
    conv, master = create_conversation(db, get_or_create_user(db, "alice").id, "c")
    foreground = ForegroundCommands(db, caps(1), processes.register(db))
    write = db.write
    with foreground.running(conv.id, master.id):
        monkeypatch.setattr(db, "write", lambda *a, **kw: (_ for _ in ()).throw(OSError("no database")))
    monkeypatch.setattr(db, "write", write)
    assert work_counts.running_foreground_commands(db, conv.id) == (1, 1)
    with foreground.running(conv.id, master.id):  # the cap of one: the leftover row went first
        assert work_counts.running_foreground_commands(db, conv.id) == (1, 1)



WAIT_S = 5


def test_another_users_start_does_not_wait_for_one_under_way(db, monkeypatch):
    alices, alices_master = create_conversation(db, get_or_create_user(db, "alice").id, "a")
    bobs, bobs_master = create_conversation(db, get_or_create_user(db, "bob").id, "b")
    counting, go_on, bob_started = threading.Event(), threading.Event(), threading.Event()
    counted = work_counts.running_foreground_commands

    def slow_for_alice(database: Database, cid: str) -> tuple[int, int]:
        if cid == alices.id:  # a slow database, under alice's lock
            counting.set()
            go_on.wait(WAIT_S * 2)
        return counted(database, cid)

    monkeypatch.setattr(work_counts, "running_foreground_commands", slow_for_alice)
    foreground = ForegroundCommands(db, caps(), processes.register(db))

    def start(conversation_id: str, agent_id: str, started: threading.Event | None = None) -> None:
        with foreground.running(conversation_id, agent_id):
            if started is not None:
                started.set()

    alice = threading.Thread(target=start, args=(alices.id, alices_master.id))
    bob = threading.Thread(target=start, args=(bobs.id, bobs_master.id, bob_started))
    alice.start()
    try:
        assert counting.wait(WAIT_S)
        bob.start()
        assert bob_started.wait(WAIT_S), "bob's start waited for alice's"
    finally:
        go_on.set()
        alice.join(WAIT_S * 2)
        if bob.ident is not None:
            bob.join(WAIT_S * 2)
    assert work_counts.running_foreground_commands(db, alices.id) == (0, 0)


def test_threads_starting_one_users_commands_at_once_pass_the_cap_together_never(db, monkeypatch):
    alice = get_or_create_user(db, "alice").id
    conversations = [create_conversation(db, alice, f"c{i}") for i in range(3)]
    counted = work_counts.running_foreground_commands

    def slow_count(database: Database, cid: str) -> tuple[int, int]:
        found = counted(database, cid)
        time.sleep(0.05)  # the moment between the check and the insert
        return found

    monkeypatch.setattr(work_counts, "running_foreground_commands", slow_count)
    foreground = ForegroundCommands(db, caps(1), processes.register(db))
    go, release, outcomes = threading.Barrier(len(conversations)), threading.Event(), queue.Queue()

    def start(conversation_id: str, agent_id: str) -> None:
        go.wait(WAIT_S)
        try:
            with foreground.running(conversation_id, agent_id):
                outcomes.put(True)
                release.wait(WAIT_S)
        except CapReached:
            outcomes.put(False)

    threads = [threading.Thread(target=start, args=(conv.id, master.id)) for conv, master in conversations]
    for thread in threads:
        thread.start()
    found = sorted(outcomes.get(timeout=WAIT_S * 2) for _ in threads)
    release.set()
    for thread in threads:
        thread.join(WAIT_S)
    assert found == [False, False, True]


WORKERS = 5
SHARED_CAP = 3


def _worker(url: str, conversation_id: str, agent_id: str, go, results, release) -> None:
    db = Database(url)
    counted = work_counts.running_foreground_commands

    def slow_count(database: Database, cid: str) -> tuple[int, int]:
        found = counted(database, cid)
        time.sleep(0.05)  # the moment between the check and the insert
        return found

    work_counts.running_foreground_commands = slow_count
    foreground = ForegroundCommands(db, caps(SHARED_CAP), processes.register(db))
    go.wait(10)
    try:
        with foreground.running(conversation_id, agent_id):
            results.put(True)
            release.wait(30)
    except CapReached:
        results.put(False)
    db.dispose()


@pytest.mark.parametrize("kind", ["postgresql", "mariadb"])
def test_processes_starting_one_users_foreground_commands_at_once_pass_the_cap_together_never(tmp_path, kind):
    with fresh_database(kind, tmp_path) as url:
        db = Database(url)
        db.migrate()
        alice = get_or_create_user(db, "alice")
        conversations = [create_conversation(db, alice.id, f"c{i}") for i in range(WORKERS)]
        ctx = multiprocessing.get_context("spawn")
        go, release, results = ctx.Event(), ctx.Event(), ctx.Queue()
        workers = [ctx.Process(target=_worker, args=(url, conv.id, master.id, go, results, release))
                   for conv, master in conversations]
        for worker in workers:
            worker.start()
        go.set()
        started = [results.get(timeout=60) for _ in workers]
        assert sorted(started) == [False] * (WORKERS - SHARED_CAP) + [True] * SHARED_CAP
        assert work_counts.running_foreground_commands(db, conversations[0][0].id)[1] == SHARED_CAP
        release.set()
        for worker in workers:
            worker.join(60)
            assert worker.exitcode == 0
        assert work_counts.running_foreground_commands(db, conversations[0][0].id)[1] == 0
        db.dispose()

"""What keeps a process's work in hand across database trouble: heartbeats register again after a peer
forgot us, and a task's final status is retried until written, never written twice, never over a take-over."""

from __future__ import annotations

import os
from contextlib import contextmanager
from types import SimpleNamespace

import pytest
from sqlalchemy.exc import OperationalError

from modules.multi_agent.message_router import MessageRouter, PendingMessage
from modules.storage import conversations, processes
from modules.storage import pending_messages as queue
from modules.storage import tasks as task_store
from modules.storage.db import Database
from modules.storage.models import ServerProcess, Task
from modules.storage.users import get_or_create_user
from server.chat_flow_types import FAILED, SUCCEEDED, TurnOutcome
from server.tasks import models as task_models
from server.tasks.models import TaskManager


class FlakyDatabase(Database):
    """`fail_before` write transactions raise an outage error before running; `fail_after` of them raise
    one after committing (the commit happened, its answer was lost)."""

    def __init__(self, url: str):
        super().__init__(url)
        self.fail_before = self.fail_after = self.writes = 0

    @contextmanager
    def write(self):
        self.writes += 1
        if self.fail_before:
            self.fail_before -= 1
            raise OperationalError("UPDATE", {}, Exception("database is down"))
        with super().write() as s:
            yield s
        if self.fail_after:
            self.fail_after -= 1
            raise OperationalError("COMMIT", {}, Exception("connection lost after the commit"))


@pytest.fixture
def db(tmp_path):
    database = FlakyDatabase(f"sqlite:///{tmp_path / 'app.db'}")
    database.migrate()
    yield database
    database.dispose()


# -- heartbeats ------------------------------------------------------------------------
def test_a_heartbeat_after_a_peer_forgot_us_registers_us_again(db):
    me = processes.register(db)
    processes.forget(db, {me})
    assert me not in processes.alive_processes(db, "someone-else", 10)
    processes.heartbeat(db, me)
    with db.read() as s:
        row = s.get(ServerProcess, me)
    assert row is not None and row.pid == os.getpid() and row.host == processes.HOST
    assert me in processes.alive_processes(db, "someone-else", 10)


def test_a_heartbeat_keeps_a_live_process_from_being_judged_gone(db):
    me = processes.register(db)
    with Database.write(db) as s:
        s.get(ServerProcess, me).heartbeat_at -= 60
    assert me in processes.gone_processes(db, "someone-else", 10)
    processes.heartbeat(db, me)
    assert me not in processes.gone_processes(db, "someone-else", 10)
    with db.read() as s:
        assert len(list(s.query(ServerProcess))) == 1  # beat, not registered twice


def test_a_process_on_this_host_whose_pid_is_gone_is_gone_at_once(db):
    me = processes.register(db)
    with Database.write(db) as s:
        s.get(ServerProcess, me).pid = 2**22 + 7  # beyond pid_max: no such process
    assert processes.gone_processes(db, "someone-else", 10) == {me: processes.HOST}
    assert me not in processes.alive_processes(db, "someone-else", 10)


# -- the final status --------------------------------------------------------------------
@pytest.fixture
def task_manager(db, monkeypatch):
    """A TaskManager reduced to what `_write_final_status` uses: the database, the router, our process id."""
    naps = []
    monkeypatch.setattr(task_models.time, "sleep", naps.append)
    manager = TaskManager.__new__(TaskManager)
    manager._rt = SimpleNamespace(db=db, router=MessageRouter(db), membership=SimpleNamespace(process_id="me"))
    conv, master = conversations.create_conversation(db, get_or_create_user(db, "u").id, "t")
    with Database.write(db) as s:
        task = task_store.create_task_in(s, conversation_id=conv.id, agent_id=master.id, task_type="chat",
                                         owner="me")
    notice = PendingMessage.new(conversation_id=conv.id, target_agent_id=master.id, type="notice",
                                content="[Sub-agent X succeeded]", source_display_name="X",
                                meta={"source": "sub_agent"})
    return manager, task.id, notice, master, naps


def test_the_final_status_is_retried_through_an_outage_with_its_notice_written_once(db, task_manager):
    manager, task_id, notice, master, naps = task_manager
    db.fail_before = 3
    assert manager._write_final_status(task_id, TurnOutcome(SUCCEEDED), notice) is True
    assert task_store.get_task(db, task_id).status == "succeeded"
    assert [r.id for r in queue.list_queued(db, master.id)] == [notice.id]
    assert len(naps) == 3 and naps == sorted(naps) and naps[0] > 0


def test_a_final_status_committed_whose_answer_was_lost_counts_as_written(db, task_manager):
    manager, task_id, notice, master, naps = task_manager
    db.fail_after = 1
    assert manager._write_final_status(task_id, TurnOutcome(FAILED, {"code": "x"}), notice) is True
    assert task_store.get_task(db, task_id).status == "failed"
    assert [r.id for r in queue.list_queued(db, master.id)] == [notice.id]
    assert len(naps) == 1


def test_a_task_another_process_took_over_keeps_its_status_and_gets_no_notice(db, task_manager):
    manager, task_id, notice, master, _ = task_manager
    with Database.write(db) as s:
        task = s.get(Task, task_id)
        task.status, task.owner = "failed", "the-other-process"
    assert manager._write_final_status(task_id, TurnOutcome(SUCCEEDED), notice) is False
    assert task_store.get_task(db, task_id).status == "failed"
    assert queue.list_queued(db, master.id) == []

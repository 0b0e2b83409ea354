"""The background-command finisher: a wave is one transaction and one delivery per agent, a timeout ends
`timed_out`, a database outage is retried until the finish (with its notice) is recorded, a record the database
refuses holds up no other, and one finisher at a time writes whatever ends meanwhile, however late it arrives.

bench/notifications shows the cost of getting the batching wrong; these tests make it a failure."""

from __future__ import annotations

import logging
import threading
import time
from contextlib import contextmanager

import pytest
from sqlalchemy.exc import OperationalError

from modules import background_command_manager as bcm
from modules.background_command_manager import BackgroundCommandManager, Finish
from modules.multi_agent.message_router import MessageRouter
from modules.statuses import CommandStatus, MessageSource, Visibility
from modules.storage import pending_messages as queue
from modules.storage.db import Database
from modules.storage.models import BackgroundCommand
from modules.storage.records import now
from modules.tools.sandbox import Sandbox
from test.unit.teams import conversation_with_sub_agent

SANDBOX = Sandbox().probe()  # the product's: bubblewrap where it works here, else unsandboxed


class CountingDatabase(Database):
    """Counts write transactions; `fail_next` makes that many of them raise an outage error first."""

    def __init__(self, url: str):
        super().__init__(url)
        self.writes = 0
        self.fail_next = 0

    @contextmanager
    def write(self):
        self.writes += 1
        if self.fail_next:
            self.fail_next -= 1
            raise OperationalError("UPDATE", {}, Exception("database is down"))
        with super().write() as s:
            yield s


def _spawn(fn, *args):
    thread = threading.Thread(target=fn, args=args, daemon=True)
    thread.start()
    return thread


@pytest.fixture
def team(tmp_path):
    db = CountingDatabase(f"sqlite:///{tmp_path / 'app.db'}")
    conv, master, sub, _ = conversation_with_sub_agent(db)
    router = MessageRouter(db)
    delivered = []
    router.deliver = lambda notice: delivered.append(notice)  # the receiver-decided step, observed
    manager = BackgroundCommandManager(db, router, sandbox=SANDBOX, logs_dir=tmp_path / "logs", tail_chars=1000,
                                       spawn=_spawn,
                                       owner="proc-1")
    yield db, conv, master, sub, manager, delivered
    db.dispose()


def _running(db, conv, agent, n):
    """`n` commands recorded as running for `agent` (not started: the test finishes them itself)."""
    ids = []
    with Database.write(db) as s:
        for i in range(n):
            cmd = BackgroundCommand(id=f"{agent.display_name}-{i}", conversation_id=conv.id, agent_id=agent.id,
                                    command=f"job {i}", status=CommandStatus.RUNNING, output_truncated=False,
                                    timeout_s=10,
                                    log_path="/dev/null", owner="proc-1", created_at=now())
            s.add(cmd)
            ids.append(cmd.id)
    return ids


def _finish(command_id, ended_at, status="succeeded"):
    return Finish(command_id, status, 0, f"out of {command_id}", False, None, ended_at)


def test_a_wave_is_one_transaction_and_one_delivery_per_agent(team):
    db, conv, master, sub, manager, delivered = team
    ids = _running(db, conv, master, 3) + _running(db, conv, sub, 2)
    t0 = now()
    # Four finishes already handed in while the fifth arrives: the fifth's finisher takes them all at once.
    manager._finished = [_finish(i, t0 + n) for n, i in enumerate(ids[:4])]
    db.writes = 0
    manager._submit(_finish(ids[4], t0 + 4))
    assert db.writes == 1, "a wave of finishes must be written in one transaction"
    # One delivery per agent, of its last notice (delivery drains the agent's whole queue).
    assert sorted(n.meta.command_id for n in delivered) == sorted([ids[2], ids[4]])
    assert [r.meta["command_id"] for r in queue.list_queued(db, master.id)] == ids[:3]
    assert [r.meta["command_id"] for r in queue.list_queued(db, sub.id)] == ids[3:]


def test_a_notice_is_named_by_its_command_and_carries_the_documented_metadata(team):
    """Its id is the command's (a finish recorded twice could not queue two notices); its metadata is what
    docs/API.md lists for a `user_message` of source `background_command`."""
    db, conv, master, _, manager, delivered = team
    (command_id,) = _running(db, conv, master, 1)
    ended = now()
    manager._finish_reliably([_finish(command_id, ended)])
    [row] = queue.list_queued(db, master.id)
    assert (row.id, row.type, row.source_display_name, row.target_agent_id) == (
        f"cmd-{command_id}", "notice", "background_command", master.id)
    assert row.meta == {"source": MessageSource.BACKGROUND_COMMAND, "visibility": Visibility.COMPACT,
                        "auto_message_type": "background_command", "background_command_notice": True,
                        "command_id": command_id, "status": CommandStatus.SUCCEEDED, "finished_at": ended}
    assert row.content == bcm.build_command_notice_text(manager.get(command_id)) and delivered[0].id == row.id


def test_notices_queue_in_the_order_the_commands_ended(team):
    db, conv, master, _, manager, delivered = team
    ids = _running(db, conv, master, 3)
    t0 = now()
    manager._finish_reliably([_finish(ids[0], t0 + 2), _finish(ids[1], t0), _finish(ids[2], t0 + 1)])
    assert [r.meta["command_id"] for r in queue.list_queued(db, master.id)] == [ids[1], ids[2], ids[0]]
    assert [n.meta.command_id for n in delivered] == [ids[0]]


def test_an_outage_is_retried_until_the_finish_and_its_notice_are_recorded_once(team, monkeypatch, caplog):
    db, conv, master, _, manager, delivered = team
    naps = []
    monkeypatch.setattr(bcm.time, "sleep", naps.append)
    (command_id,) = _running(db, conv, master, 1)
    db.fail_next = 6
    with caplog.at_level(logging.ERROR, logger=bcm.__name__):
        manager._finish_reliably([_finish(command_id, now())])
    assert naps == pytest.approx([0.4, 0.8, 1.6, 3.2, 6.4, 10.0]), "each try backs off twice as long, up to 10 s"
    assert [r.getMessage() for r in caplog.records] == [
        f"could not record the end of command {command_id} (attempt {n})" for n in range(1, 7)]
    assert manager.get(command_id).status == CommandStatus.SUCCEEDED
    assert manager.get(command_id).output_tail == f"out of {command_id}"
    assert [r.meta["command_id"] for r in queue.list_queued(db, master.id)] == [command_id]
    assert len(delivered) == 1


def test_a_finish_already_recorded_is_not_recorded_again(team):
    db, conv, master, _, manager, delivered = team
    (command_id,) = _running(db, conv, master, 1)
    manager._finish_reliably([_finish(command_id, now())])
    manager._finish_reliably([_finish(command_id, now(), status=CommandStatus.FAILED)])
    assert manager.get(command_id).status == CommandStatus.SUCCEEDED
    assert len(queue.list_queued(db, master.id)) == 1 and len(delivered) == 1


def test_a_command_past_its_timeout_ends_timed_out_and_says_so(team, tmp_path):
    db, conv, master, _, manager, delivered = team
    started = time.monotonic()
    # 3 s: long enough for `echo` to have run on any machine, far below the `sleep 30` it cuts short.
    command_id = manager.start(conv.id, master.id, "echo begun; sleep 30", tmp_path / "ws", 3)
    deadline = time.monotonic() + 20
    while manager.get(command_id).status == CommandStatus.RUNNING:
        assert time.monotonic() < deadline, "the timed-out command never finished"
        time.sleep(0.02)
    assert time.monotonic() - started < 25, "the timeout did not stop `sleep 30`"
    cmd = manager.get(command_id)
    assert cmd.status == CommandStatus.TIMED_OUT and cmd.error == "timed out after 3 s"
    (notice,) = queue.list_queued(db, master.id)
    assert notice.meta["status"] == CommandStatus.TIMED_OUT
    assert notice.content.startswith(f"[Background command {command_id[:8]} timed_out")
    assert "timed out after 3 s" in notice.content and "begun" in notice.content
    assert [n.meta.command_id for n in delivered] == [command_id]


def _refusing(manager, refused, times=1):
    """The database refuses (for its content, not an outage) each finish of `refused` `times` times."""
    real, left = manager._finish, {refused: times}

    def finish(batch):
        if any(left.get(f.command_id) for f in batch):
            if len(batch) == 1:
                left[refused] -= 1
            raise ValueError("value refused by the database")
        real(batch)

    manager._finish = finish


def test_a_record_the_database_refuses_is_written_without_its_output_and_holds_up_no_other(team, monkeypatch, caplog):
    db, conv, master, _, manager, delivered = team
    naps = []
    monkeypatch.setattr(bcm.time, "sleep", naps.append)
    ids = _running(db, conv, master, 3)
    _refusing(manager, ids[1])
    t0 = now()
    unstorable = Finish(ids[1], "failed", 2, "unstorable", True, None, t0 + 1)
    batch = [_finish(ids[0], t0), unstorable, _finish(ids[2], t0 + 2)]
    with caplog.at_level(logging.ERROR, logger=bcm.__name__):
        manager._finish_reliably(batch)
    assert naps == [], "a refusal of the output is no outage: written again at once"
    refused = manager.get(ids[1])
    assert (refused.status, refused.exit_code, refused.output_tail, refused.output_truncated, refused.error) == (
        CommandStatus.FAILED, 2, "", False, "its output could not be stored; see the command log")
    assert [manager.get(i).output_tail for i in (ids[0], ids[2])] == [f"out of {ids[0]}", f"out of {ids[2]}"]
    assert [r.meta["command_id"] for r in queue.list_queued(db, master.id)] == ids
    assert [r.getMessage() for r in caplog.records] == [
        "could not record the end of 3 background commands together; one by one",
        f"the database refused the end of command {ids[1]}; recording it without its output (attempt 1)"]


def test_a_record_refused_even_without_its_output_waits_as_for_an_outage(team, monkeypatch):
    db, conv, master, _, manager, _ = team
    naps = []
    monkeypatch.setattr(bcm.time, "sleep", naps.append)
    (command_id,) = _running(db, conv, master, 1)
    _refusing(manager, command_id, times=7)
    manager._finish_reliably([_finish(command_id, now())])
    assert naps == pytest.approx([0.8, 1.6, 3.2, 6.4, 10.0, 10.0])  # not after the first refusal: its output
    assert manager.get(command_id).status == CommandStatus.SUCCEEDED and manager.get(command_id).output_tail == ""


def test_one_failed_delivery_keeps_no_other_agent_asleep_and_says_which(team, caplog):
    db, conv, master, sub, manager, delivered = team
    ids = _running(db, conv, master, 1) + _running(db, conv, sub, 1)

    def deliver(notice):
        if notice.target_agent_id == master.id:
            raise RuntimeError("no route")
        delivered.append(notice)

    manager._router.deliver = deliver
    with caplog.at_level(logging.ERROR, logger=bcm.__name__):
        manager._finish_reliably([_finish(ids[0], now()), _finish(ids[1], now() + 1)])
    assert [n.meta.command_id for n in delivered] == [ids[1]]
    assert [r.getMessage() for r in caplog.records] == [
        f"could not deliver the notice of {ids[0]} to agent {master.id}"]
    assert len(queue.list_queued(db, master.id)) == 1  # stored: the membership sweep wakes its agent


def test_one_finisher_at_a_time_and_a_finish_handed_in_meanwhile_joins_its_next_batch(team):
    db, conv, master, _, manager, _ = team
    ids = _running(db, conv, master, 2)
    real, entered, release, writers, busy = manager._finish_reliably, threading.Event(), threading.Event(), [], []

    def finish_reliably(batch):
        busy.append(1)
        writers.append((threading.get_ident(), len(busy), [f.command_id for f in batch]))
        entered.set()
        release.wait(30)
        real(batch)
        busy.pop()

    manager._finish_reliably = finish_reliably
    first = _spawn(manager._submit, _finish(ids[0], now()))
    assert entered.wait(30)
    second = _spawn(manager._submit, _finish(ids[1], now()))
    second.join(30)
    assert not second.is_alive(), "a finish handed in while another is written must not wait to write itself"
    release.set()
    first.join(30)
    assert [(n, batch) for _, n, batch in writers] == [(1, [ids[0]]), (1, [ids[1]])]
    assert writers[0][0] == writers[1][0] == first.ident
    assert [manager.get(i).status for i in ids] == [CommandStatus.SUCCEEDED, CommandStatus.SUCCEEDED]


class HookedLock:
    """The manager's lock, with a hook run after its n-th release (while nobody holds it)."""

    def __init__(self, hooks):
        self._lock, self.releases, self.hooks = threading.Lock(), 0, hooks

    def __enter__(self):
        self._lock.acquire()

    def __exit__(self, *exc):
        self._lock.release()
        self.releases += 1
        if hook := self.hooks.pop(self.releases, None):
            hook()


def test_a_finish_handed_in_as_the_finisher_leaves_is_written_by_a_new_one(team):
    """The finisher found nothing more and is leaving, but has not said so yet: the finish handed in then sees a
    finisher at work and returns; the leaving finisher must start another, or that command stays `running`."""
    db, conv, master, _, manager, _ = team
    ids = _running(db, conv, master, 2)
    spawned = []
    manager._spawn = lambda fn, *args: spawned.append((fn, args))
    # releases: 1 handed in, 2 took the batch, 3 found the list empty (and leaves), 4 the late finish handed in
    manager._lock = HookedLock({3: lambda: manager._submit(_finish(ids[1], now()))})
    manager._submit(_finish(ids[0], now()))
    assert manager.get(ids[0]).status == CommandStatus.SUCCEEDED and manager.get(ids[1]).status == CommandStatus.RUNNING
    [(fn, args)] = spawned
    fn(*args)
    assert manager.get(ids[1]).status == CommandStatus.SUCCEEDED
    assert [r.meta["command_id"] for r in queue.list_queued(db, master.id)] == ids

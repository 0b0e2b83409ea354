"""The background-command finisher: a wave is one transaction and one delivery per agent, a timeout ends
`timed_out`, and a database outage is retried until the finish (with its notice) is recorded.

bench/notifications shows the cost of getting the batching wrong; these tests make it a failure."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

import pytest
from sqlalchemy.exc import OperationalError

from modules import background_command_manager as bcm
from modules.background_command_manager import BackgroundCommandManager, Finish
from modules.multi_agent.message_router import MessageRouter
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
                                    command=f"job {i}", status="running", output_truncated=False, timeout_s=10,
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
    assert sorted(n.meta["command_id"] for n in delivered) == sorted([ids[2], ids[4]])
    assert [r.meta["command_id"] for r in queue.list_queued(db, master.id)] == ids[:3]
    assert [r.meta["command_id"] for r in queue.list_queued(db, sub.id)] == ids[3:]


def test_notices_queue_in_the_order_the_commands_ended(team):
    db, conv, master, _, manager, delivered = team
    ids = _running(db, conv, master, 3)
    t0 = now()
    manager._finish_reliably([_finish(ids[0], t0 + 2), _finish(ids[1], t0), _finish(ids[2], t0 + 1)])
    assert [r.meta["command_id"] for r in queue.list_queued(db, master.id)] == [ids[1], ids[2], ids[0]]
    assert [n.meta["command_id"] for n in delivered] == [ids[0]]


def test_an_outage_is_retried_until_the_finish_and_its_notice_are_recorded_once(team, monkeypatch):
    db, conv, master, _, manager, delivered = team
    naps = []
    monkeypatch.setattr(bcm.time, "sleep", naps.append)
    (command_id,) = _running(db, conv, master, 1)
    db.fail_next = 3
    manager._finish_reliably([_finish(command_id, now())])
    assert len(naps) == 3 and naps == sorted(naps), "each failed attempt backs off, longer each time"
    assert manager.get(command_id).status == "succeeded"
    assert manager.get(command_id).output_tail == f"out of {command_id}"
    assert [r.meta["command_id"] for r in queue.list_queued(db, master.id)] == [command_id]
    assert len(delivered) == 1


def test_a_finish_already_recorded_is_not_recorded_again(team):
    db, conv, master, _, manager, delivered = team
    (command_id,) = _running(db, conv, master, 1)
    manager._finish_reliably([_finish(command_id, now())])
    manager._finish_reliably([_finish(command_id, now(), status="failed")])
    assert manager.get(command_id).status == "succeeded"
    assert len(queue.list_queued(db, master.id)) == 1 and len(delivered) == 1


def test_a_command_past_its_timeout_ends_timed_out_and_says_so(team, tmp_path):
    db, conv, master, _, manager, delivered = team
    started = time.monotonic()
    # 3 s: long enough for `echo` to have run on any machine, far below the `sleep 30` it cuts short.
    command_id = manager.start(conv.id, master.id, "MasterAgent", "echo begun; sleep 30", tmp_path / "ws", 3)
    deadline = time.monotonic() + 20
    while manager.get(command_id).status == "running":
        assert time.monotonic() < deadline, "the timed-out command never finished"
        time.sleep(0.02)
    assert time.monotonic() - started < 25, "the timeout did not stop `sleep 30`"
    cmd = manager.get(command_id)
    assert cmd.status == "timed_out" and cmd.error == "timed out after 3 s"
    (notice,) = queue.list_queued(db, master.id)
    assert notice.meta["status"] == "timed_out"
    assert notice.content.startswith(f"[Background command {command_id[:8]} timed_out")
    assert "timed out after 3 s" in notice.content and "begun" in notice.content
    assert [n.meta["command_id"] for n in delivered] == [command_id]

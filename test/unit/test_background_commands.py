"""BackgroundCommandManager on a real database: notices queued with the finish, polled until delivered, lost."""

from __future__ import annotations

import logging
import os
import subprocess
import threading
import time
from pathlib import Path

from modules import background_command_manager as bcm
from modules.background_command_manager import BackgroundCommandManager
from modules.multi_agent.message_router import MessageRouter
from modules.multi_agent.router_hooks import RouterHooks
from modules.statuses import CommandStatus
from modules.storage import conversations, processes
from modules.storage.db import Database
from modules.storage.models import BackgroundCommand
from modules.storage.records import new_id, now
from modules.storage.users import get_or_create_user
from modules.tools.launched import process_start_ticks
from modules.tools.sandbox import Sandbox
from test.db_urls import fresh_database

SANDBOX = Sandbox().probe()


def _spawn(fn, *args):
    thread = threading.Thread(target=fn, args=args, daemon=True)
    thread.start()
    return thread


def _setup(tmp_path, url=None):
    db = Database(url or f"sqlite:///{tmp_path / 'app.db'}")
    db.migrate()
    conv, master = conversations.create_conversation(db, get_or_create_user(db, "u").id, "t")
    delivered = []
    # the agent stays idle: notices wait
    router = MessageRouter(db, hooks=RouterHooks(wake=lambda agent_id: delivered.append(agent_id) or None))
    manager = BackgroundCommandManager(db, router, sandbox=SANDBOX, logs_dir=tmp_path / "logs", tail_chars=1000,
                                       spawn=_spawn,
                                       owner="proc-1")
    return db, conv, master, router, manager, delivered


def _wait(predicate, timeout=60):  # a bound for a busy machine: commands end in milliseconds
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.01)
    raise TimeoutError


def test_finished_commands_are_pending_until_their_notices_are_drained(tmp_path):
    db, conv, master, router, manager, delivered = _setup(tmp_path)
    ids = [manager.start(conv.id, master.id, f"echo job-{i}", tmp_path / "ws", 10) for i in range(3)]
    assert manager.has_pending_for_conversation(conv.id)
    _wait(lambda: len(manager.poll_updates(conv.id)) == 3)
    assert not manager.has_running(conv.id)
    assert [c.id for c in manager.poll_updates(conv.id)] == sorted(ids, key=lambda i: next(
        c.finished_at for c in manager.in_conversation(conv.id) if c.id == i))
    assert manager.has_pending_for_conversation(conv.id) and delivered
    drained = router.consume_pending_messages(master.id, conv.id, "task-1")
    assert len(drained) == 3 and all("exit code 0" in m.content for m in drained)
    assert manager.poll_updates(conv.id) == [] and not manager.has_pending_for_conversation(conv.id)


def test_a_command_whose_process_is_gone_is_reported_lost_once(tmp_path):
    db, conv, master, router, manager, _ = _setup(tmp_path)
    manager.start(conv.id, master.id, "sleep 30", tmp_path / "ws", 60)
    _wait(lambda: manager.in_conversation(conv.id)[0].pid)
    successor = BackgroundCommandManager(db, router, sandbox=SANDBOX, logs_dir=tmp_path / "logs", tail_chars=1000,
                                         spawn=_spawn,
                                         owner="proc-2")
    assert successor.recover_lost({"proc-1": "elsewhere"}) == 1
    assert successor.recover_lost({"proc-1": "elsewhere"}) == 0
    cmd = manager.in_conversation(conv.id)[0]
    assert cmd.status == CommandStatus.LOST and "its result is lost" in cmd.error
    notices = router.consume_pending_messages(master.id, conv.id, "task-1")
    assert len(notices) == 1 and "lost" in notices[0].content
    manager.cancel(cmd.id)  # the original runner ends; its late finish must not add a second notice
    _wait(lambda: not manager._cancel)
    assert router.consume_pending_messages(master.id, conv.id, "task-2") == []


def test_output_with_nul_bytes_is_stored_and_holds_up_no_other_command(tmp_path):
    """PostgreSQL text cannot hold NUL: the tail keeps a replacement character, and the finisher goes on."""
    with fresh_database("postgresql", tmp_path) as url:
        db, conv, master, router, manager, _ = _setup(tmp_path, url)
        nul = manager.start(conv.id, master.id, "printf 'a\\0b'", tmp_path / "ws", 10)
        _wait(lambda: not manager.has_running(conv.id))
        fine = manager.start(conv.id, master.id, "echo fine", tmp_path / "ws", 10)
        _wait(lambda: not manager.has_running(conv.id))
        by_id = {c.id: c for c in manager.in_conversation(conv.id)}
        assert by_id[nul].status == CommandStatus.SUCCEEDED and by_id[nul].output_tail == "a\ufffdb"
        assert by_id[fine].status == CommandStatus.SUCCEEDED and by_id[fine].output_tail.strip() == "fine"
        assert len(router.consume_pending_messages(master.id, conv.id, "task-1")) == 2
        db.dispose()


def _orphan(db, conv, master, tmp_path, pid: int, pid_started: int | None, owner: str | None = "proc-dead") -> None:
    with db.write() as s:
        s.add(BackgroundCommand(id=new_id(), conversation_id=conv.id, agent_id=master.id, command="sleep 60",
                                status=CommandStatus.RUNNING, timeout_s=60, pid=pid, pid_started=pid_started,
                                log_path=str(tmp_path / "orphan.log"), owner=owner, created_at=now()))


def test_recovery_kills_a_dead_servers_command_but_never_a_process_that_reused_its_pid(tmp_path):
    db, conv, master, router, manager, _ = _setup(tmp_path)
    bystander = subprocess.Popen(["sleep", "60"], start_new_session=True)
    orphan = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        started = process_start_ticks(bystander.pid)
        _orphan(db, conv, master, tmp_path, bystander.pid, started - 1)  # the pid now names another process
        _orphan(db, conv, master, tmp_path, orphan.pid, process_start_ticks(orphan.pid))
        assert manager.recover_lost({"proc-dead": processes.HOST}) == 2
        assert orphan.wait(5) == -9
        assert bystander.poll() is None
        assert {c.status for c in manager.in_conversation(conv.id)} == {CommandStatus.LOST}
    finally:
        bystander.kill()
        orphan.kill()
        bystander.wait()
        orphan.wait()


def test_a_command_that_cannot_be_run_ends_failed_with_the_reason_and_a_notice(tmp_path, monkeypatch, caplog):
    db, conv, master, router, manager, delivered = _setup(tmp_path)

    def broken(*args, **kwargs):
        raise RuntimeError("no shell here")

    monkeypatch.setattr(bcm, "run_shell", broken)
    before = now()
    with caplog.at_level(logging.ERROR, logger=bcm.__name__):
        command_id = manager.start(conv.id, master.id, "echo never", tmp_path / "ws", 10)
        _wait(lambda: not manager.has_running(conv.id))
    cmd = manager.get(command_id)
    assert (cmd.status, cmd.exit_code, cmd.output_tail, cmd.output_truncated, cmd.error) == (
        CommandStatus.FAILED, None, "", False, "could not run: no shell here")
    assert before <= cmd.finished_at <= now()
    [record] = caplog.records
    assert record.getMessage() == f"background command {command_id} failed to run" and record.exc_info
    [notice] = router.consume_pending_messages(master.id, conv.id, "task-1")
    assert "could not run: no shell here" in notice.content and delivered == [master.id]
    assert manager.output_tail(cmd) == ""  # ended without output: nothing, not the log of a running one


def test_a_running_command_records_its_pid_with_the_processs_start_time(tmp_path):
    """A pid and its start time name one process: recovery kills by both (never a reused pid)."""
    db, conv, master, router, manager, _ = _setup(tmp_path)
    command_id = manager.start(conv.id, master.id, "sleep 30", tmp_path / "ws", 60)
    _wait(lambda: manager.get(command_id).pid)
    cmd = manager.get(command_id)
    try:
        assert cmd.pid_started is not None and cmd.pid_started == process_start_ticks(cmd.pid)
    finally:
        manager.cancel(command_id)
        _wait(lambda: not manager.has_running(conv.id))


def test_pending_work_is_counted_per_conversation(tmp_path):
    db, conv, master, router, manager, _ = _setup(tmp_path)
    other, other_master = conversations.create_conversation(db, get_or_create_user(db, "v").id, "other")
    command_id = manager.start(other.id, other_master.id, "sleep 30", tmp_path / "ws", 60)
    try:
        assert manager.has_pending_for_conversation(other.id) and not manager.has_pending_for_conversation(conv.id)
    finally:
        manager.cancel(command_id)
        _wait(lambda: not manager.has_running(other.id))


def test_recovery_kills_the_command_of_a_row_that_names_no_owner(tmp_path):
    """A row written before owners were recorded belongs to no live process: it is this host's to end."""
    db, conv, master, router, manager, _ = _setup(tmp_path)
    orphan = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        _orphan(db, conv, master, tmp_path, orphan.pid, process_start_ticks(orphan.pid), owner=None)
        assert manager.recover_lost({}) == 1
        assert orphan.wait(5) == -9
    finally:
        orphan.kill()
        orphan.wait()


def test_recovery_leaves_a_reused_pid_alone_and_says_so(tmp_path, caplog):
    db, conv, master, router, manager, _ = _setup(tmp_path)
    bystander = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        _orphan(db, conv, master, tmp_path, bystander.pid, None)  # recorded before start times were
        with caplog.at_level(logging.WARNING, logger=bcm.__name__):
            assert manager.recover_lost({"proc-dead": processes.HOST}) == 1
        assert bystander.poll() is None
        assert [r.getMessage() for r in caplog.records] == [
            f"not killing pid {bystander.pid}: it is not the command's process any more"]
    finally:
        bystander.kill()
        bystander.wait()


def _aged_logs(tmp_path, names, days=8):
    logs = tmp_path / "logs"
    logs.mkdir(exist_ok=True)
    aged = time.time() - days * 86400
    for name in names:
        (logs / name).write_text(name)
        os.utime(logs / name, (aged, aged))
    return logs


def test_logs_are_pruned_at_most_hourly_unless_forced(tmp_path, monkeypatch):
    db, conv, master, router, manager, _ = _setup(tmp_path)
    fresh = BackgroundCommandManager(db, router, sandbox=SANDBOX, logs_dir=tmp_path / "none yet", tail_chars=10,
                                     spawn=_spawn)
    assert fresh.prune_logs() == 0  # no command has run: no folder of logs yet
    logs = _aged_logs(tmp_path, ["a.log", "b.log", "c.log"])
    stat = Path.stat

    def vanishing(path, *args, **kwargs):  # another process pruned b.log between the listing and the look
        if path.name == "b.log":
            raise FileNotFoundError(path)
        return stat(path, *args, **kwargs)

    monkeypatch.setattr(Path, "stat", vanishing)
    assert manager.prune_logs() == 2
    monkeypatch.undo()
    assert sorted(p.name for p in logs.iterdir()) == ["b.log"]
    _aged_logs(tmp_path, ["d.log"])
    assert manager.prune_logs() == 0 and (logs / "d.log").exists()  # pruned less than an hour ago
    assert manager.prune_logs(force=True) == 2 and list(logs.iterdir()) == []


def test_logs_of_commands_ended_longer_ago_than_the_retention_are_deleted(tmp_path):
    db, conv, master, router, manager, _ = _setup(tmp_path)
    running_id = manager.start(conv.id, master.id, "sleep 30", tmp_path / "ws", 60)
    _wait(lambda: manager.in_conversation(conv.id)[0].pid)
    old, fresh = tmp_path / "logs" / "old.log", tmp_path / "logs" / "fresh.log"
    old.write_text("old")
    fresh.write_text("fresh")
    week_ago = time.time() - 8 * 86400
    for path in (old, tmp_path / "logs" / f"{running_id}.log"):
        os.utime(path, (week_ago, week_ago))
    assert manager.prune_logs(force=True) == 1
    assert not old.exists() and fresh.exists() and (tmp_path / "logs" / f"{running_id}.log").exists()
    manager.cancel(running_id)

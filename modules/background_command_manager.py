"""Background shell commands and their completion notices.

A command runs in the command sandbox with a timeout and a capped output log.
When it ends, its record is marked finished and its completion notice is
queued to the agent that started it *in the same transaction*: a crash
between "finished" and "notified" cannot lose the notice. The notice is then
delivered by the router like any message (inline into a running agent, or a
new turn for an idle one). A command that was running when the server died
is reported as lost after the restart, never silently dropped.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from sqlalchemy.exc import InterfaceError, OperationalError

from modules.multi_agent.message_router import MessageRouter, PendingMessage
from modules.notice_fence import fenced, neutralised
from modules.offload import off_loop
from modules.peer_signals import CANCEL_COMMAND, PeerSignals
from modules.statuses import CommandStatus, MessageSource, Visibility
from modules.storage import commands as command_store
from modules.storage import pending_messages as queue
from modules.storage import processes
from modules.storage.commands import (
    CANCELLED,
    FAILED,
    LOST,
    RUNNING,
    SUCCEEDED,
    TIMED_OUT,
)
from modules.storage.db import Database
from modules.storage.message_meta import MessageMeta
from modules.storage.models import BackgroundCommand
from modules.storage.records import new_id, now
from modules.tools.launched import kill_group, process_start_ticks
from modules.tools.sandbox import Sandbox
from modules.tools.shell import CommandOutcome, read_tail, run_shell
from modules.work_caps import WorkCaps, check, starting

log = logging.getLogger(__name__)

NOTICE_OUTPUT_CHARS = 2_000
GATHER_S = 0.002
PRUNE_EVERY_S = 3600.0


@dataclass(frozen=True)
class Finish:
    """How a command ended, waiting to be recorded."""

    command_id: str
    status: str
    exit_code: int | None
    output: str
    truncated: bool
    error: str | None
    ended_at: float  # when the command's process ended, not when the finish was written


@dataclass(frozen=True)
class CommandStart:
    """What the command's runner needs: the rest is in its row."""

    command_id: str
    command: str
    cwd: Path
    timeout_s: float


def _status_of(outcome: CommandOutcome, cancelled: bool) -> str:
    if cancelled:
        return CANCELLED
    if outcome.timed_out:
        return TIMED_OUT
    return SUCCEEDED if outcome.exit_code == 0 and not outcome.disk_error else FAILED


def build_command_notice_text(cmd: BackgroundCommand) -> str:
    duration = (cmd.finished_at or now()) - cmd.created_at
    head = f"[Background command {cmd.id[:8]} {cmd.status}"
    if cmd.exit_code is not None and cmd.status != LOST:
        head += f", exit code {cmd.exit_code}"
    head += f", {duration:.1f} s] `{neutralised(cmd.command)}`"
    if cmd.error:
        head += f"\n{cmd.error}"
    tail = (cmd.output_tail or "")[-NOTICE_OUTPUT_CHARS:]
    if not tail.strip():
        return f"{head}\n(no output)"
    output = fenced(f"output of background command {cmd.id[:8]}", f"Output (tail):\n{tail}")
    return f"{head}\n{output}"


class BackgroundCommandManager:
    def __init__(self, db: Database, router: MessageRouter, *, sandbox: Sandbox, logs_dir: Path, tail_chars: int,
                 spawn: Callable[..., Any], log_max_bytes: int = 1024 * 1024, log_retention_s: float = 7 * 86400,
                 owner: str | None = None, peers: PeerSignals | None = None, caps: WorkCaps | None = None):
        self._db = db
        self._caps = caps  # None: no cap (the server always passes the configured ones)
        self._sandbox = sandbox
        self._log_max_bytes = log_max_bytes
        self._log_retention_s = log_retention_s
        self._pruned_at = 0.0
        self._owner = owner
        self._peers = peers or PeerSignals()
        self._router = router
        self._logs_dir = logs_dir
        self._tail_chars = tail_chars
        self._spawn = spawn
        self._cancel: dict[str, threading.Event] = {}
        self._finished: list[Finish] = []
        self._finishing = False
        self._lock = threading.Lock()

    # -- starting --------------------------------------------------------
    def start(self, conversation_id: str, agent_id: str, command: str, cwd: Path, timeout_s: float) -> str:
        """Record the command as running and start it; returns its id at once. CapReached (nothing started)
        when the conversation or its user already runs as many as the caps allow."""
        self.prune_logs()
        start = CommandStart(new_id(), command, cwd, timeout_s)
        log_path = self._logs_dir / f"{start.command_id}.log"
        with starting(self._db, conversation_id):
            if self._caps is not None:
                check(self._db, self._caps.commands, conversation_id)
            command_store.insert_running(self._db, BackgroundCommand(
                id=start.command_id, conversation_id=conversation_id, agent_id=agent_id, command=command,
                status=RUNNING, timeout_s=timeout_s, log_path=str(log_path), owner=self._owner, created_at=now(),
            ))
        with self._lock:
            self._cancel[start.command_id] = threading.Event()
        self._spawn(self._run, start, log_path)
        return start.command_id

    def _run(self, start: CommandStart, log_path: Path) -> None:
        cancel = self._cancel[start.command_id]
        try:
            outcome = run_shell(
                start.command, sandbox=self._sandbox, cwd=start.cwd, log_path=log_path, timeout_s=start.timeout_s,
                tail_chars=self._tail_chars, log_max_bytes=self._log_max_bytes, should_stop=cancel.is_set,
                on_start=lambda pid: self._record_pid(start.command_id, pid),
            )
            error = f"timed out after {start.timeout_s:g} s" if outcome.timed_out else \
                (f"stopped: {outcome.disk_error}" if outcome.disk_error else None)
            finish = Finish(start.command_id, _status_of(outcome, cancel.is_set()), outcome.exit_code,
                            outcome.output, outcome.truncated, error, now())
        except Exception as exc:
            log.exception("background command %s failed to run", start.command_id)
            finish = Finish(start.command_id, FAILED, None, "", False, f"could not run: {exc}", now())
        # Its process has ended: from here a cancel is answered by the database (running until the finish
        # is written, then not), never by a flag nothing reads any more.
        with self._lock:
            del self._cancel[start.command_id]
        self._submit(finish)

    def _record_pid(self, command_id: str, pid: int) -> None:
        command_store.record_pid(self._db, command_id, pid, process_start_ticks(pid))

    def _submit(self, finish: Finish) -> None:
        """Hand a finished command to the finisher; the first to arrive becomes it.

        Commands that end together are written in one transaction and their agent is
        told once, so a wave of N completions costs a few writes, not N.
        """
        with self._lock:
            self._finished.append(finish)
            if self._finishing:
                return
            self._finishing = True
        try:
            while True:
                time.sleep(GATHER_S)  # let commands that ended with this one join its batch
                with self._lock:
                    batch, self._finished = self._finished, []
                    if not batch:
                        return
                self._finish_reliably(batch)
        finally:
            with self._lock:
                self._finishing = False
                left = bool(self._finished)
            if left:  # arrived while we were leaving: someone must write them
                self._spawn(self._submit_pending)

    def _submit_pending(self) -> None:
        with self._lock:
            if self._finishing or not self._finished:
                return
            finish = self._finished.pop()
        self._submit(finish)

    def _finish_reliably(self, batch: list[Finish]) -> None:
        """A database outage must not leave a finished command `running` with no notice: retry until
        it is recorded (the notice is written with the finish mark, so it is never half done).

        A batch that fails is split, so one record the database refuses cannot hold up the others; a
        record refused for its content (not for an outage) is written again without its output."""
        if len(batch) > 1:
            try:
                self._finish(batch)
                return
            except Exception:
                log.exception("could not record the end of %d background commands together; one by one",
                              len(batch))
            for finish in batch:
                self._finish_reliably([finish])
            return
        finish, attempt = batch[0], 0
        while True:
            try:
                self._finish([finish])
                return
            except (OperationalError, InterfaceError):
                attempt += 1
                log.exception("could not record the end of command %s (attempt %d)", finish.command_id, attempt)
                time.sleep(_backoff_s(attempt))
            except Exception:
                attempt += 1
                log.exception("the database refused the end of command %s; recording it without its output "
                              "(attempt %d)", finish.command_id, attempt)
                finish = replace(finish, output="", truncated=False,
                                 error="its output could not be stored; see the command log")
                if attempt > 1:  # refused even so: not its output; wait as for an outage
                    time.sleep(_backoff_s(attempt))

    def _deliver_each(self, notices: list[PendingMessage]) -> None:
        """After the commit: one failed delivery must not keep the others' agents asleep (the membership
        sweep wakes idle agents with queued messages)."""
        for notice in notices:
            try:
                self._router.deliver(notice)
            except Exception:
                log.exception("could not deliver the notice of %s to agent %s", notice.meta.command_id,
                              notice.target_agent_id)

    def _finish(self, batch: list[Finish]) -> None:
        """Mark finished and queue the notices in one transaction, then deliver the last one per agent
        (delivery drains the agent's whole queue, so one is enough).

        A wave of N completions is a handful of statements, not N round trips: the commands still running
        are read (and locked) at once, their finish marks go out as one UPDATE per column set at flush,
        and the notices as one batched insert."""
        ends = {f.command_id: f for f in batch}
        with self._db.write() as s:
            commands = command_store.lock_running_in(s, list(ends))
            commands.sort(key=lambda cmd: ends[cmd.id].ended_at)  # notices queue in finish order
            for cmd in commands:
                f = ends[cmd.id]
                cmd.status, cmd.exit_code, cmd.error = f.status, f.exit_code, f.error
                cmd.output_tail, cmd.output_truncated, cmd.finished_at = f.output, f.truncated, f.ended_at
            queued = self._router.enqueue_many_in(s, [self._notice(cmd) for cmd in commands])
        last_per_agent = {notice.target_agent_id: notice for notice in queued}
        self._deliver_each(list(last_per_agent.values()))

    def _notice(self, cmd: BackgroundCommand) -> PendingMessage:
        return PendingMessage.new(
            id=f"cmd-{cmd.id}", conversation_id=cmd.conversation_id, target_agent_id=cmd.agent_id, type="notice",
            content=build_command_notice_text(cmd), source_display_name="background_command",
            meta=MessageMeta(source=MessageSource.BACKGROUND_COMMAND, visibility=Visibility.COMPACT,
                             auto_message_type="background_command", background_command_notice=True,
                             command_id=cmd.id, status=CommandStatus(cmd.status), finished_at=cmd.finished_at),
        )

    # -- control and queries ----------------------------------------------
    def cancel(self, command_id: str) -> bool:
        """Cancel a running command wherever it runs: here at once; in another process by a flag in the
        database and a signal to look at it now. False when it has ended."""
        if self._cancel_here(command_id):
            return True
        flagged = command_store.request_cancel(self._db, command_id)
        if flagged:
            self._peers.publish(CANCEL_COMMAND, command_id)
        return flagged

    def cancel_agent_commands(self, agent_id: str) -> int:
        """Cancel every running command of an agent (it was terminated)."""
        return sum(self.cancel(command_id) for command_id in command_store.running_ids_of_agent(self._db, agent_id))

    def _cancel_here(self, command_id: str) -> bool:
        with self._lock:
            flag = self._cancel.get(command_id)
        if flag is None:
            return False
        flag.set()
        return True

    def apply_cancel_requests(self) -> None:
        """Cancel the commands of this process that another process flagged."""
        with self._lock:
            mine = list(self._cancel)
        if not mine:
            return
        for command_id in command_store.cancel_requested_among(self._db, mine):
            self._cancel_here(command_id)

    def get(self, command_id: str) -> BackgroundCommand | None:
        return command_store.get(self._db, command_id)

    def in_conversation(self, conversation_id: str) -> list[BackgroundCommand]:
        return command_store.list_for_conversation(self._db, conversation_id)

    def output_tail(self, cmd: BackgroundCommand) -> str:
        if cmd.status == RUNNING:
            return read_tail(Path(cmd.log_path), self._tail_chars)[0]
        return cmd.output_tail or ""

    def poll_updates(self, conversation_id: str) -> list[BackgroundCommand]:
        """Finished commands whose notice is not delivered yet, in finish order."""
        ids = [command_id for n in queue.queued_notices(self._db, conversation_id,
                                                                  MessageSource.BACKGROUND_COMMAND)
               if (command_id := n.typed_meta.command_id)]
        rows = command_store.get_many(self._db, ids)
        return [rows[i] for i in ids if i in rows]

    def has_running(self, conversation_id: str | None = None, agent_id: str | None = None) -> bool:
        """Whether a command of the conversation, or of the agent, still runs."""
        return command_store.any_running(self._db, conversation_id, agent_id)

    def has_pending_for_conversation(self, conversation_id: str) -> bool:
        """Running, or finished and not yet notified."""
        return self.has_running(conversation_id) or bool(self.poll_updates(conversation_id))

    # -- recovery --------------------------------------------------------
    def recover_lost(self, gone_owners: dict[str, str]) -> int:
        """Commands whose process died (or was never recorded): kill what is left, report them lost."""
        orphans = [c for c in command_store.list_running(self._db) if c.owner is None or c.owner in gone_owners]
        for cmd in orphans:
            if cmd.pid and (cmd.owner is None or gone_owners[cmd.owner] == processes.HOST):  # ours to kill
                _kill_if_same_process(cmd.pid, cmd.pid_started)
            output, truncated = read_tail(Path(cmd.log_path), self._tail_chars)
            self._finish([Finish(cmd.id, LOST, None, output, truncated,
                                 "the server process running it stopped; its result is lost", now())])
        return len(orphans)

    # -- retention ---------------------------------------------------------
    def prune_logs(self, *, force: bool = False) -> int:
        """Delete the logs of commands that ended more than the retention period ago (at most hourly)."""
        current = time.time()
        if not force and current - self._pruned_at < PRUNE_EVERY_S:
            return 0
        self._pruned_at = current
        running = {Path(c.log_path).name for c in command_store.list_running(self._db)}
        # In the thread pool: a user's commands can leave hundreds of thousands of logs in a week, seconds of
        # system calls that on the event loop froze every client.
        return off_loop(_remove_logs, self._logs_dir, running, current - self._log_retention_s)


def _remove_logs(logs_dir: Path, running: set[str], ended_before: float) -> int:
    """Delete the logs in `logs_dir` last written before `ended_before`, but those named in `running`."""
    removed = 0
    for path in logs_dir.glob("*.log"):  # none while no command has run
        try:
            if path.name not in running and path.stat().st_mtime < ended_before:
                path.unlink()
                removed += 1
        except FileNotFoundError:
            continue
    return removed


def _backoff_s(attempt: int) -> float:
    """How long a finish waits before its next try: twice as long each time, at most 10 s."""
    return min(0.2 * 2.0**attempt, 10.0)


def _kill_if_same_process(pid: int, started: int | None) -> None:
    """Kill a dead server's command group, unless its pid now names another process (reused after a
    reboot, or a pid recorded before start times were)."""
    if started is None or process_start_ticks(pid) != started:
        log.warning("not killing pid %d: it is not the command's process any more", pid)
        return
    kill_group(pid)

"""Run one shell command through the sandbox, bounded in time and in the output it keeps.

The output comes through a pipe into a capped log (head and tail kept), so a
command that prints without end neither fills the disk nor blocks: once the
log overflows, the reader slows down and the command waits on its full pipe.
The command has ended when its process has (in the sandbox, every process it
started dies with it) and no process holds the pipe any more; on timeout or
stop its whole process group is killed.
"""

from __future__ import annotations

import errno
import os
import select
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from modules.tools.capped_log import CappedLog
from modules.tools.launched import Launched, kill_group
from modules.tools.sandbox import Sandbox

POLL_INTERVAL_S = 0.1
READ_BYTES = 65536
OVERFLOW_READ_PAUSE_S = 0.001  # past the cap, at most READ_BYTES per pause: a runaway printer costs little
DRAIN_AFTER_EXIT_S = 0.5  # unsandboxed: how long a child that kept the pipe open may keep printing


@dataclass(frozen=True)
class CommandOutcome:
    exit_code: int | None
    output: str
    truncated: bool
    timed_out: bool
    stopped: bool
    duration_s: float
    disk_error: str | None = None  # stopped for the workspace quota or the data disk's reserve

    @property
    def ended_as(self) -> str:
        """`ok`, `failed` (a non-zero exit), `timeout` or `stopped`."""
        if self.timed_out:
            return "timeout"
        if self.stopped:
            return "stopped"
        return "ok" if self.exit_code == 0 else "failed"


def read_tail(path: Path, tail_chars: int) -> tuple[str, bool]:
    """The last `tail_chars` characters of a log file, and whether anything was cut.

    NUL characters become U+FFFD like other undecodable bytes: PostgreSQL text cannot hold them."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return "", False
    with path.open("rb") as fh:
        # UTF-8 takes at most 4 bytes a character: read enough bytes for the tail.
        start = max(0, size - tail_chars * 4)
        fh.seek(start)
        text = fh.read().decode("utf-8", errors="replace").replace("\x00", "\ufffd")
    truncated = start > 0 or len(text) > tail_chars
    return text[-tail_chars:], truncated


def run_shell(command: str, *, sandbox: Sandbox, cwd: Path, log_path: Path, timeout_s: float, tail_chars: int,
              log_max_bytes: int, should_stop: Callable[[], bool] = lambda: False,
              on_start: Callable[[int], None] | None = None,
              on_output: Callable[[bytes], None] = lambda data: None) -> CommandOutcome:
    """Run `command` in `cwd` (the conversation's workspace) through `sandbox`; `on_output` gets each chunk
    the command prints, and b"" on each idle poll (so a throttled reader can send what it holds)."""
    sandbox.prepare_workspace(cwd)
    started = time.monotonic()
    out = CappedLog(log_path, max_bytes=log_max_bytes)
    read_fd = -1
    launched: Launched | None = None
    timed_out = stopped = False
    disk_error: str | None = None
    disk_check = sandbox.disk.watch(cwd) if sandbox.disk is not None else (lambda: None)
    try:
        launched, read_fd = sandbox.spawn_with_output(command, cwd)
        proc = launched.proc
        if on_start is not None:
            try:
                on_start(proc.pid)
            except BaseException:
                kill_group(proc.pid)
                proc.wait()
                raise
        os.set_blocking(read_fd, False)
        pipe_open, exited_at, reap_delay = True, None, 0.0005
        while pipe_open or proc.poll() is None:
            if time.monotonic() - started > timeout_s:
                timed_out = True
            elif should_stop():
                stopped = True
            else:
                disk_error = disk_check()
            if timed_out or stopped or disk_error:
                kill_group(proc.pid)
                proc.wait()
                break
            if not pipe_open:  # the processes closed their output on exit; the first is waitable a moment later
                time.sleep(reap_delay)
                reap_delay = min(reap_delay * 2, POLL_INTERVAL_S)
                continue
            if exited_at is None and proc.poll() is not None:
                exited_at = time.monotonic()  # unsandboxed: a child may still hold the pipe; end it soon
            if exited_at is not None and time.monotonic() - exited_at > DRAIN_AFTER_EXIT_S:
                kill_group(proc.pid)
                break
            pipe_open = _read_some(read_fd, out, on_output)
    finally:
        if read_fd >= 0:
            os.close(read_fd)
        if launched is not None:
            launched.release()
        out.close()
    if sandbox.disk is not None and not (timed_out or stopped or disk_error):
        disk_error = sandbox.disk.over_quota(cwd)  # it ended between two reads, past its quota
    output, truncated = read_tail(log_path, tail_chars)
    outcome = CommandOutcome(
        exit_code=proc.returncode, output=output, truncated=truncated or out.dropped > 0, timed_out=timed_out,
        stopped=stopped, duration_s=round(time.monotonic() - started, 3), disk_error=disk_error,
    )
    for watch in sandbox.watchers:  # the operator's metrics (server/metrics.py)
        watch(outcome.ended_as, outcome.duration_s)
    return outcome


def _read_some(fd: int, out: CappedLog, on_output: Callable[[bytes], None]) -> bool:
    """Move what the pipe holds into the log; False once every writer has closed it."""
    if not select.select([fd], [], [], POLL_INTERVAL_S)[0]:
        on_output(b"")
        return True
    try:
        data = os.read(fd, READ_BYTES)
    except OSError as exc:
        if exc.errno == errno.EAGAIN:
            return True
        raise
    if not data:
        return False
    out.write(data)
    on_output(data)
    if out.overflowing:
        time.sleep(OVERFLOW_READ_PAUSE_S)
    return True

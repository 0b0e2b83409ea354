"""Run one shell command in its own process group, bounded in time and output.

Output goes to a log file rather than a pipe, so a chatty command can never
block on a full pipe, and only its tail is read back. On timeout or stop the
whole process group is killed, children included.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

POLL_INTERVAL_S = 0.1


@dataclass(frozen=True)
class CommandOutcome:
    exit_code: int | None
    output: str
    truncated: bool
    timed_out: bool
    stopped: bool
    duration_s: float


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


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_shell(command: str, *, cwd: Path, log_path: Path, timeout_s: float, tail_chars: int,
              should_stop: Callable[[], bool] = lambda: False,
              on_start: Callable[[int], None] | None = None) -> CommandOutcome:
    """Run `command` under /bin/sh in its own process group.

    The command's processes hold the write end of a pipe that nothing writes to;
    when the last of them exits, the read end reports end-of-file at once, so the
    end is seen without polling delay (select() on it is cooperative under eventlet).
    Timeouts, stops and commands that leave a background child behind are caught by
    the periodic check of the shell itself.
    """
    cwd.mkdir(parents=True, exist_ok=True)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    exit_r, exit_w = os.pipe()
    try:
        with log_path.open("wb") as out:
            proc = subprocess.Popen(
                ["/bin/sh", "-c", command], cwd=cwd, stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True, pass_fds=(exit_w,),
            )
        os.close(exit_w)
        exit_w = -1
        if on_start is not None:
            try:
                on_start(proc.pid)
            except BaseException:
                kill_group(proc)
                proc.wait()
                raise
        timed_out = stopped = False
        reap_delay = 0.0  # > 0 once the pipe reported end-of-file
        while proc.poll() is None:
            if time.monotonic() - started > timeout_s:
                timed_out = True
            elif should_stop():
                stopped = True
            if timed_out or stopped:
                kill_group(proc)
                proc.wait()
                break
            if reap_delay:
                # The processes closed their files on exit; the shell becomes waitable a moment later.
                time.sleep(reap_delay)
                reap_delay = min(reap_delay * 2, POLL_INTERVAL_S)
            elif select.select([exit_r], [], [], POLL_INTERVAL_S)[0] and os.read(exit_r, 1) == b"":
                reap_delay = 0.0005
    finally:
        os.close(exit_r)
        if exit_w >= 0:
            os.close(exit_w)
    output, truncated = read_tail(log_path, tail_chars)
    return CommandOutcome(
        exit_code=proc.returncode, output=output, truncated=truncated, timed_out=timed_out,
        stopped=stopped, duration_s=round(time.monotonic() - started, 3),
    )

"""A sandbox started ahead of its command (README, "Command sandbox"): the costly part of a command's start
happens between commands, off their path.

Moving a process into a cgroup waits for an RCU grace period of the kernel (about 12 ms at load 6 on two
cores), and exec'ing the shell that moves itself and then bwrap costs as much again. So the next command's
process is started as soon as the last one took its own: a shell that joins its cgroup and execs bwrap,
which then waits on a pipe for its options (`--args FD`). Its command line is fixed (`/bin/sh /dev/fd/N`):
the command comes as a one-line script on another pipe, written with the options when a command takes the
process. One is kept at a time (no network only: a networked sandbox's start goes through slirp4netns).
If the server dies first, bwrap reads the end of its options pipe: with no option it has no file system
to run anything in and exits. The options (under PIPE_BUF) arrive whole or not at all.
"""

from __future__ import annotations

import atexit
import os
import shlex
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass

from modules.tools.command_cgroup import CommandCgroup
from modules.tools.launched import Launched


@dataclass
class Warm:
    """A started sandbox process waiting for its options and its command."""

    proc: subprocess.Popen[bytes]
    options_w: int  # bwrap's `--args` pipe
    script_w: int  # the script pipe, read by the sandbox's /bin/sh as /dev/fd/<script_fd>
    script_fd: int
    output_r: int  # the command's output (stdout and stderr)
    seccomp_fd: int | None  # the descriptor number the filter has in the sandbox process
    cgroup: CommandCgroup | None

    def run(self, options: list[str], inner: list[str]) -> tuple[Launched, int]:
        """Give it its options and its command; the Launched command and the read end of its output."""
        script = "exec " + " ".join(shlex.quote(arg) for arg in inner) + f" {self.script_fd}<&-\n"
        _write_all(self.script_w, script.encode())
        _write_all(self.options_w, b"".join(option.encode() + b"\0" for option in options))
        return Launched(self.proc, cgroup=self.cgroup), self.output_r

    def discard(self) -> None:
        """Close its pipes (bwrap then exits for want of options) and reap it."""
        for fd in (self.script_w, self.options_w, self.output_r):
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.cgroup is not None:
            self.cgroup.release()


def _write_all(fd: int, data: bytes) -> None:
    """Write and close: the options and the script are far under a pipe's 64 KiB, so this never blocks."""
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


class WarmStarts:
    """Keeps one Warm ready; `take` hands it out and starts the next one in the background."""

    def __init__(self, start: Callable[[], Warm]):
        self._start = start
        self._ready: Warm | None = None
        self._refills: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._closed = False
        with _OPEN_LOCK:
            _OPEN.add(self)

    def take(self) -> Warm | None:
        refill = threading.Thread(target=self._refill, name="sandbox-warm", daemon=True)
        with self._lock:
            warm, self._ready = self._ready, None
            if not self._closed:
                self._refills = [t for t in self._refills if t.is_alive()] + [refill]
                refill.start()
        if warm is not None and warm.proc.poll() is not None:  # died meanwhile (an older server's clean-up)
            warm.discard()
            return None
        return warm

    def _refill(self) -> None:
        try:
            warm = self._start()
        except (OSError, subprocess.SubprocessError):
            return
        with self._lock:
            kept = self._ready is None and not self._closed
            if kept:
                self._ready = warm
        if not kept:
            warm.discard()

    def close(self) -> None:
        """Discard the ready sandbox and wait for a start in flight (which then discards its own): no process
        of ours is left running, or left for someone else to reap."""
        with self._lock:
            self._closed = True
            warm, self._ready = self._ready, None
            refills, self._refills = self._refills, []
        if warm is not None:
            warm.discard()
        for refill in refills:
            refill.join(timeout=10)
        with _OPEN_LOCK:
            _OPEN.discard(self)


# Every WarmStarts not closed yet, held (not weakly) so that none is collected with a sandbox still running.
_OPEN: set[WarmStarts] = set()
_OPEN_LOCK = threading.Lock()


def close_all() -> None:
    """Close every WarmStarts: at exit, and at the end of a test session (test/conftest.py), whose process may
    live on: mutmut's runner waits for any child of it (`os.wait`) and must find only its own."""
    with _OPEN_LOCK:
        opened = list(_OPEN)
    for starts in opened:
        starts.close()


atexit.register(close_all)

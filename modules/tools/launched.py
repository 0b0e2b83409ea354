"""A started command and what serves it, as the sandbox hands it to the runner (modules/tools/shell.py)."""

from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from modules.tools.command_cgroup import CommandCgroup


@dataclass
class Launched:
    """A started command and the helper processes that serve it (the network stack)."""

    proc: subprocess.Popen[bytes]
    helpers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    fds: list[int] = field(default_factory=list)  # ours to close once the command ends
    cgroup: CommandCgroup | None = None  # the command's own, removed once it ended

    def release(self) -> None:
        if self.cgroup is not None:
            self.cgroup.release()
            self.cgroup = None
        for fd in self.fds:
            os.close(fd)
        self.fds.clear()
        for helper in self.helpers:
            try:
                helper.wait(timeout=2)
            except subprocess.TimeoutExpired:
                helper.kill()
                helper.wait()


def kill_group(pid: int) -> None:
    """SIGKILL a command's whole process group (a sandbox's bwrap takes its sandbox along)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def process_start_ticks(pid: int) -> int | None:
    """When `pid` started, in clock ticks after boot (field 22 of /proc/PID/stat); None if it is gone.

    A pid plus its start time names one process: a pid alone may have been reused since."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    try:
        return int(stat[stat.rindex(")") + 2:].split()[19])
    except (ValueError, IndexError):
        return None

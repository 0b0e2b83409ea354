"""A started command and what serves it, as the sandbox hands it to the runner (modules/tools/shell.py)."""

from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass, field

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

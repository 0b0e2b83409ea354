"""Disk limits of commands (README, "Command sandbox"): a quota per conversation workspace (WORKSPACE_MAX_MB)
and a free-space reserve on the data disk (DATA_DISK_RESERVE_MB), so that one user's command cannot fill
the disk under everyone and the server's own writes (its database, its logs) still succeed.

A command is refused while either is passed, and a running one is stopped once it passes either: the
free space is read (statvfs) every half second, the workspace's size (its files' allocated blocks, read
in eventlet's thread pool) every quarter second, or ten times as long as the last read took (so reading a
big workspace costs at most a tenth of a core), and once more when the command ends (a command that ended
past the quota is reported so). The kernel bounds what it can: RLIMIT_FSIZE holds each file a command
writes to what the quota had left when it started. The rest is a poll, not the kernel: a command writing
many files can pass the quota by what it writes in one interval (README, "Command sandbox", says why no
kernel quota is used).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from modules.offload import off_loop

FREE_EVERY_S = 0.5
SIZE_EVERY_S = 0.25  # the shortest interval between two reads of a workspace's size
SIZE_READ_SHARE = 10  # the interval is at least this many times the last read's duration


def tree_bytes(root: Path) -> int:
    """The space the files under `root` take (allocated blocks; links not followed)."""
    total = 0
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    total += st.st_blocks * 512
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(Path(entry.path))
        except OSError:
            continue
    return total


@dataclass(frozen=True)
class DiskGuard:
    data_dir: Path
    reserve_bytes: int
    workspace_max_bytes: int

    def low_space(self) -> str | None:
        try:
            free = shutil.disk_usage(self.data_dir).free
        except OSError:
            return None
        if free >= self.reserve_bytes:
            return None
        return (f"the server's data disk has {free / 2**20:.0f} MB free, less than its reserve "
                f"(DATA_DISK_RESERVE_MB={self.reserve_bytes / 2**20:g}): commands are stopped and refused until "
                "space is freed (delete files in the workspace)")

    def mode(self) -> str:
        """How the quota holds, for the start-up line."""
        return (f"workspace quota {self.workspace_max_bytes / 2**20:g} MB by a poll every {SIZE_EVERY_S:g} s "
                "(no kernel quota), each file by RLIMIT_FSIZE")

    def room(self, workspace: Path) -> int:
        """What the workspace's quota has left, in bytes (0 when it is passed)."""
        return max(0, self.workspace_max_bytes - off_loop(tree_bytes, workspace))

    def over_quota(self, workspace: Path) -> str | None:
        used = off_loop(tree_bytes, workspace)
        if used <= self.workspace_max_bytes:
            return None
        return (f"the workspace holds {used / 2**20:.0f} MB, more than its quota (WORKSPACE_MAX_MB="
                f"{self.workspace_max_bytes / 2**20:g}): delete files in it before running more")

    def problem(self, workspace: Path) -> str | None:
        """Why no command may start in `workspace` now, or None."""
        return self.low_space() or self.over_quota(workspace)

    def watch(self, workspace: Path) -> Callable[[], str | None]:
        """A check for a running command's loop: the reason to stop it, or None (cheap between reads)."""
        last = {"free": 0.0, "size": time.monotonic(), "every": SIZE_EVERY_S}

        def check() -> str | None:
            now = time.monotonic()
            if now - last["free"] >= FREE_EVERY_S:
                last["free"] = now
                if reason := self.low_space():
                    return reason
            if now - last["size"] >= last["every"]:
                reason = self.over_quota(workspace)
                last["size"] = time.monotonic()
                last["every"] = max(SIZE_EVERY_S, SIZE_READ_SHARE * (last["size"] - now))
                return reason
            return None

        return check

"""Disk limits of commands (README, "Command sandbox"): a quota per conversation workspace (WORKSPACE_MAX_MB)
and a free-space reserve on the data disk (DATA_DISK_RESERVE_MB), so that one user's command cannot fill
the disk under everyone and the server's own writes (its database, its logs) still succeed.

A command is refused while either is passed, and a running one is stopped once it passes either: the
free space is read (statvfs) every half second, the workspace's size (its files' allocated blocks, read
in eventlet's thread pool) every second. The kernel's RLIMIT_FSIZE still caps each file it writes.
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
SIZE_EVERY_S = 1.0


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
        last = {"free": 0.0, "size": time.monotonic() - SIZE_EVERY_S + FREE_EVERY_S}  # first size read after 0.5 s

        def check() -> str | None:
            now = time.monotonic()
            if now - last["free"] >= FREE_EVERY_S:
                last["free"] = now
                if reason := self.low_space():
                    return reason
            if now - last["size"] >= SIZE_EVERY_S:
                last["size"] = now
                return self.over_quota(workspace)
            return None

        return check

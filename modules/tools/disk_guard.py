"""Disk limits of commands (README, "Command sandbox"): a quota per conversation workspace (WORKSPACE_MAX_MB)
and a free-space reserve on the data disk (DATA_DISK_RESERVE_MB), so that one user's command cannot fill
the disk under everyone and the server's own writes (its database, its logs) still succeed.

The quota is the kernel's where the server may mount (WORKSPACE_QUOTA=auto on a root server, `loop`): each
workspace is a file system of its own (modules/tools/workspace_images.py), so no write passes it, and a
command that ends with its workspace full is reported so and the next one refused. Elsewhere it is a poll:
the workspace's size (its files' allocated blocks, read in eventlet's thread pool) is read every quarter
second, or ten times as long as the last read took (so reading a big workspace costs at most a tenth of a
core), and once more when the command ends; a command past it is stopped. RLIMIT_FSIZE holds each file a
command writes to what the quota had left when it started, but a command writing many files can pass the
quota by what it writes in one interval. Either way the free space is read (statvfs) every half second: a
command is refused while the reserve is passed, and a running one stopped once it passes it.
"""

from __future__ import annotations

import functools
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from modules.config import ConfigError, Settings
from modules.offload import off_loop
from modules.tools import mount_namespace
from modules.tools.tree_size import tree_bytes
from modules.tools.workspace_images import WorkspaceImages

FREE_EVERY_S = 0.5
SIZE_EVERY_S = 0.25  # the shortest interval between two reads of a workspace's size
SIZE_READ_SHARE = 10  # the interval is at least this many times the last read's duration
FULL_BELOW = 64 * 1024  # a workspace of its own file system with less room than this (or no inode left) is full


@dataclass(frozen=True)
class DiskGuard:
    data_dir: Path
    reserve_bytes: int
    workspace_max_bytes: int
    images: WorkspaceImages | None = None  # the kernel's quota; None: the poll
    poll_reason: str = "not asked for"  # why the quota is a poll, for the start-up line

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
        quota = f"workspace quota {self.workspace_max_bytes / 2**20:g} MB"
        if self.images is not None:
            return f"{quota} by the kernel (a loop-mounted ext4 image per workspace)"
        return (f"{quota} by a poll every {SIZE_EVERY_S:g} s (no kernel quota: {self.poll_reason}), each file by "
                "RLIMIT_FSIZE")

    def _kernel_bound(self, workspace: Path) -> bool:
        """The workspace is its own file system (mounted again here if it was unmounted while idle)."""
        if self.images is None:
            return False
        if not self.images.holds(workspace) and self.images.has_image(workspace):
            off_loop(functools.partial(self.images.open, workspace, create=False))
        return self.images.holds(workspace)

    def room(self, workspace: Path) -> int | None:
        """What the workspace's quota has left, in bytes (0 when it is passed), for RLIMIT_FSIZE; None where
        the kernel holds the quota itself."""
        if self._kernel_bound(workspace):
            return None
        return max(0, self.workspace_max_bytes - off_loop(tree_bytes, workspace))

    def over_quota(self, workspace: Path) -> str | None:
        """Why the workspace takes no more (past its quota, or full), or None."""
        full = False
        if self._kernel_bound(workspace):
            st = os.statvfs(workspace)
            used = (st.f_blocks - st.f_bfree) * st.f_frsize
            full = st.f_bavail * st.f_frsize < FULL_BELOW or st.f_favail == 0
        else:
            used = off_loop(tree_bytes, workspace)
        quota = f"WORKSPACE_MAX_MB={self.workspace_max_bytes / 2**20:g}"
        if used > self.workspace_max_bytes:
            return (f"the workspace holds {used / 2**20:.0f} MB, more than its quota ({quota}): delete files in "
                    "it before running more")
        if full:
            return (f"the workspace is full ({used / 2**20:.0f} MB, its quota is {quota}): writes past it failed; "
                    "delete files in it before running more")
        return None

    def problem(self, workspace: Path) -> str | None:
        """Why no command may start in `workspace` now, or None."""
        return self.low_space() or self.over_quota(workspace)

    def watch(self, workspace: Path) -> Callable[[], str | None]:
        """A check for a running command's loop: the reason to stop it, or None (cheap between reads). Where
        the kernel holds the quota only the data disk's reserve is read."""
        kernel_bound = self._kernel_bound(workspace)
        last = {"free": 0.0, "size": time.monotonic(), "every": SIZE_EVERY_S}

        def check() -> str | None:
            now = time.monotonic()
            if now - last["free"] >= FREE_EVERY_S:
                last["free"] = now
                if reason := self.low_space():
                    return reason
            if not kernel_bound and now - last["size"] >= last["every"]:
                reason = self.over_quota(workspace)
                last["size"] = time.monotonic()
                last["every"] = max(SIZE_EVERY_S, SIZE_READ_SHARE * (last["size"] - now))
                return reason
            return None

        return check


def open_workspace(disk: DiskGuard | None, workspace: Path, *, create: bool = True) -> Path:
    """The workspace's folder, its file system mounted where it has one; with `create`, made if missing."""
    if disk is not None and disk.images is not None:
        off_loop(functools.partial(disk.images.open, workspace, create=create))
    elif create:
        workspace.mkdir(parents=True, exist_ok=True)
    return workspace


def remove_workspace(disk: DiskGuard | None, workspace: Path) -> None:
    """Remove the workspace and its files (its image and its mount too), off the event loop either way: a
    workspace of 200,000 files takes seconds of system calls to remove, and on the loop they froze every client."""
    if disk is not None and disk.images is not None:
        off_loop(disk.images.remove, workspace)
    else:
        off_loop(functools.partial(shutil.rmtree, workspace, ignore_errors=True))


def build_disk_guard(settings: Settings) -> DiskGuard:
    """The quota by the kernel where WORKSPACE_QUOTA and this server allow (a mount namespace of its own, loop
    devices, mkfs.ext4), else the poll; WORKSPACE_QUOTA=loop where it cannot be is a configuration error."""
    quota = settings.workspace_max_mb * 2**20
    images: WorkspaceImages | None = None
    reason: str | None = "WORKSPACE_QUOTA=poll"
    if settings.workspace_quota != "poll":
        namespace = mount_namespace.problem()
        reason = f"the server has no mount namespace of its own ({namespace})" if namespace else None
        if reason is None:
            candidate = WorkspaceImages(settings.data_dir / "workspace_images", quota)
            reason = candidate.probe()
            images = candidate if reason is None else None
        if reason is not None and settings.workspace_quota == "loop":
            raise ConfigError(f"WORKSPACE_QUOTA=loop, but workspace images cannot be mounted here: {reason}")
    return DiskGuard(settings.data_dir, settings.data_disk_reserve_mb * 2**20, quota, images=images,
                     poll_reason=reason or "")

"""A file system of its own for each conversation's workspace, so the kernel holds WORKSPACE_MAX_MB (README,
"Command sandbox").

Each workspace is a sparse ext4 image of WORKSPACE_MAX_MB (`DATA_DIR/workspace_images/<id>.ext4`), made and
loop-mounted at the workspace's folder when the server first needs the workspace, in the server's own mount
namespace (modules/tools/mount_namespace.py): a write past it fails with ENOSPC, however many files a command
writes and however fast. The image has no journal (a workspace is scratch space; `e2fsck -p` mends one that
was mounted when its machine went down, before its next mount) and is mounted `discard`, so a deleted file's
blocks go back to the data disk, and `nosuid,nodev`.

Every step on one image (making, checking, resizing, attaching, mounting, removing) holds the image's file
lock, so that two processes of a cluster on one DATA_DIR never attach it to two loop devices (that corrupts
ext4): the second finds the device the first attached and mounts that (modules/tools/loop_device.py).

Every mount in the server's namespace is copied into each sandbox's new namespace, and that costs each
command about 0.1 ms per mount (53 ms at 500 mounted workspaces). So at most MOUNTED_KEPT workspaces stay
mounted: past that, those unused for IDLE_S are unmounted, least recently used first. A command's sandbox
keeps its own mount; any later use (a command's start, an upload, a listing, the quota's checks) mounts the
workspace again (the same loop device where a mount still holds it).

A quota changed between two starts resizes an image at its next mount where no process holds it (offline:
`e2fsck -f`, `resize2fs`): it grows, and it shrinks if its files fit; one that does not keeps its size, and
its commands are refused until files are deleted. A workspace of an older server (files, no image) is copied
into a new image when they fit, and otherwise stays on the poll (modules/tools/disk_guard.py), with a log
line.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from modules.tools import loop_device, mount_namespace, stale_holders
from modules.tools.tree_size import tree_bytes

log = logging.getLogger(__name__)

MKFS = ["mkfs.ext4", "-q", "-F", "-m", "0", "-O", "^has_journal", "-i", "8192", "-E", "lazy_itable_init=1,nodiscard"]
MOUNT_OPTIONS = "discard,noinit_itable"
MOUNT_FLAGS = mount_namespace.MS_NOSUID | mount_namespace.MS_NODEV
PROBE_BYTES = 8 * 2**20
MOVE_IN_SHARE = 0.9  # an older server's workspace is copied into an image when it fills at most this share
TOOL_TIMEOUT_S = 300.0
MOUNTED_KEPT = 32  # workspaces kept mounted past their use (see above)
IDLE_S = 60.0  # a workspace used within this long is never unmounted


class WorkspaceImages:
    def __init__(self, images_dir: Path, size_bytes: int):
        self.images_dir = images_dir
        self.size_bytes = size_bytes
        self._mounted: dict[Path, float] = {}  # workspace: when it was last used (monotonic)
        self._polled: set[Path] = set()  # an older server's workspaces too full to move into an image
        self._lock = threading.Lock()
        self._record: int | None = None  # this server's record while it lives (modules/tools/stale_holders.py)
        self.stale_removed = stale_holders.Removed(0, 0)  # what a server that is gone had left, removed at start

    def probe(self) -> str | None:
        """Why images cannot be made and mounted here, or None (one small image is tried). At a server's start:
        what servers that are gone left holding the images is removed first, and this one is recorded."""
        if shutil.which(MKFS[0]) is None:
            return "mkfs.ext4 is not installed (apt-get install e2fsprogs)"
        if not os.path.exists("/dev/loop-control"):
            return "there is no /dev/loop-control"
        image = self.images_dir / f"probe-{os.getpid()}.ext4"
        target = self.images_dir / f"probe-{os.getpid()}.mnt"
        try:
            self.images_dir.mkdir(parents=True, exist_ok=True)
            if self._record is None:
                self.stale_removed = stale_holders.remove_stale(self.images_dir)
                self._record = stale_holders.register(self.images_dir)
            _make(image, PROBE_BYTES)
            _mount(image, target)
            mount_namespace.unmount(str(target))
        except (OSError, subprocess.SubprocessError) as exc:
            return f"a loop-mounted image failed: {exc}"
        finally:
            image.unlink(missing_ok=True)
            shutil.rmtree(target, ignore_errors=True)
        return None

    def holds(self, workspace: Path) -> bool:
        """The workspace is its own file system, mounted by this process."""
        with self._lock:
            return workspace in self._mounted

    def has_image(self, workspace: Path) -> bool:
        return self._image(workspace).exists()

    def open(self, workspace: Path, *, create: bool) -> None:
        """Mount the workspace's image if it is not yet; with `create`, make one where there is none."""
        if self._touch(workspace):
            return
        with self._locked(workspace):
            if self._touch(workspace):
                return
            if os.path.ismount(workspace):  # mounted in this namespace already (another instance's doing)
                self._add(workspace)
                return
            image = self._image(workspace)
            if not image.exists():
                if not create:
                    return
                if _has_entries(workspace) and not self._move_in(workspace, image):
                    log.warning("workspace %s holds an older server's files, more than fit its quota: it stays "
                                "on the poll (it moves into an image at a later start, once its files fit)",
                                workspace.name)
                    with self._lock:
                        self._polled.add(workspace)
                    return
                if not image.exists():
                    _make(image, self.size_bytes)
            self._mount_sized(image, workspace)
            self._add(workspace)
        self._unmount_idle()

    def remove(self, workspace: Path) -> None:
        """Remove the workspace, its image and its mount. Its files are deleted through the mount first, so
        their space comes back even while another process of a cluster still has the image mounted."""
        self.open(workspace, create=False)
        with self._locked(workspace):
            with self._lock:
                mounted = self._mounted.pop(workspace, None) is not None
                self._polled.discard(workspace)
            if mounted:
                _empty(workspace)
                mount_namespace.unmount(str(workspace))
            self._image(workspace).unlink(missing_ok=True)
            shutil.rmtree(workspace, ignore_errors=True)
            (self.images_dir / f"{workspace.name}.lock").unlink(missing_ok=True)

    def close(self) -> None:
        """Unmount every workspace this process mounted (a server's namespace does so when it ends)."""
        with self._lock:
            mounted, self._mounted = self._mounted, {}
        for workspace in mounted:
            mount_namespace.unmount(str(workspace))

    def _touch(self, workspace: Path) -> bool:
        """Mark a mounted (or polled) workspace used now; False if it is neither."""
        with self._lock:
            if workspace in self._mounted:
                self._mounted[workspace] = time.monotonic()
                return True
            return workspace in self._polled

    def _add(self, workspace: Path) -> None:
        with self._lock:
            self._mounted[workspace] = time.monotonic()

    def _unmount_idle(self) -> None:
        """Past MOUNTED_KEPT mounts, unmount those idle for IDLE_S, least recently used first."""
        with self._lock:
            idle = sorted((used, ws) for ws, used in self._mounted.items() if time.monotonic() - used > IDLE_S)
            excess = len(self._mounted) - MOUNTED_KEPT
        for _, workspace in idle[:max(0, excess)]:
            with self._locked(workspace):  # never while an open() of it runs
                with self._lock:
                    used = self._mounted.get(workspace)
                    if used is None or time.monotonic() - used <= IDLE_S:
                        continue
                    del self._mounted[workspace]
                mount_namespace.unmount(str(workspace))

    def _image(self, workspace: Path) -> Path:
        return self.images_dir / f"{workspace.name}.ext4"

    @contextmanager
    def _locked(self, workspace: Path) -> Iterator[None]:
        self.images_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.images_dir / f"{workspace.name}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _mount_sized(self, image: Path, workspace: Path) -> None:
        """Mount `image` at `workspace`, resized to the quota first where no process holds it."""
        size = image.stat().st_size
        if size != self.size_bytes and loop_device.held_by(image) is None:
            self._resize(image, workspace, size)
        if _has_entries(workspace):  # a move-in's old files (the image holds their copy)
            _empty(workspace)
        _mount(image, workspace)
        lost = workspace / "lost+found"
        if lost.is_dir() and not any(lost.iterdir()):
            lost.rmdir()

    def _resize(self, image: Path, workspace: Path, size: int) -> None:
        """Offline: `e2fsck -f`, then `resize2fs` (the image grown first, or truncated after)."""
        _check(image, force=True)
        if size < self.size_bytes:
            os.truncate(image, self.size_bytes)
        done = _run(["resize2fs", str(image), f"{self.size_bytes // 1024}K"])
        if done.returncode == 0:
            os.truncate(image, self.size_bytes)
            return
        if size < self.size_bytes:
            os.truncate(image, size)
        log.warning("workspace %s keeps its %d MB file system, not WORKSPACE_MAX_MB (%d MB): %s; past the quota "
                    "its commands are refused until files are deleted", workspace.name, size // 2**20,
                    self.size_bytes // 2**20, done.stderr.decode(errors="replace").strip()[-200:])

    def _move_in(self, workspace: Path, image: Path) -> bool:
        """Copy an older server's workspace into a new image; False (and no image) when it does not fit."""
        if tree_bytes(workspace) > self.size_bytes * MOVE_IN_SHARE:
            return False
        new, target = image.with_suffix(".new"), image.with_suffix(".moving")
        try:
            _make(new, self.size_bytes)
            _mount(new, target)
            try:
                copied = _run(["cp", "-a", "--", f"{workspace}/.", f"{target}/"]).returncode == 0
            finally:
                mount_namespace.unmount(str(target))
            if copied:
                os.replace(new, image)
            log.info("workspace %s: an older server's files %s its own file system", workspace.name,
                     "moved into" if copied else "did not fit into")
            return copied
        finally:
            new.unlink(missing_ok=True)
            shutil.rmtree(target, ignore_errors=True)


def _run(argv: list[str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(argv, capture_output=True, timeout=TOOL_TIMEOUT_S, check=False)


def _make(image: Path, size_bytes: int) -> None:
    """A sparse image of `size_bytes` with an empty file system, put in place whole."""
    new = image.with_suffix(".mkfs")
    with open(new, "wb") as sink:
        sink.truncate(size_bytes)
    try:
        done = _run([*MKFS, str(new)])
        if done.returncode != 0:
            raise OSError(f"mkfs.ext4 failed: {done.stderr.decode(errors='replace').strip()[:300]}")
        os.replace(new, image)
    finally:
        new.unlink(missing_ok=True)


def _check(image: Path, *, force: bool = False) -> None:
    """`e2fsck -p`: mends what a crash left (exit 0-2); worse is an error."""
    done = _run(["e2fsck", "-p", *(["-f"] if force else []), str(image)])
    if done.returncode > 2:
        raise OSError(f"e2fsck found errors it cannot mend in {image.name}: "
                      f"{done.stdout.decode(errors='replace').strip()[:300]}")


def _mount(image: Path, target: Path) -> str:
    """Mount `image` at `target` through the loop device that holds it, or a new one; the device's path."""
    target.mkdir(parents=True, exist_ok=True)
    held = loop_device.held_by(image)
    if held is None:
        _check(image)
        held = loop_device.attach(image)
    fd, device = held
    try:
        loop_device.refresh_size(fd)  # an image grown while a peer held its device
        mount_namespace.mount(device, str(target), "ext4", MOUNT_FLAGS, MOUNT_OPTIONS)
    finally:
        os.close(fd)  # the mount holds the device from here on
    return device


def _has_entries(folder: Path) -> bool:
    try:
        with os.scandir(folder) as entries:
            return next(entries, None) is not None
    except OSError:
        return False


def _empty(folder: Path) -> None:
    for entry in os.scandir(folder):
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            Path(entry.path).unlink(missing_ok=True)

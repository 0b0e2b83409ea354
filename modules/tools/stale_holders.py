"""What a server that is gone left holding its workspaces' loop devices, removed when the next server starts
(README, "Command sandbox": the workspace quota).

A server's mounts live in its own mount namespace and its loop devices are attached with autoclear, so both go
when its last process ends. A process that outlives the server (a child that missed its parent-death signal,
in the server's namespace or in a sandbox's with its bind mount of a workspace) keeps them: the image stays
mounted and its device attached until that process ends. So each server records itself while it lives
(`servers/<pid>-<start time>` beside the images, under a lock it holds until it dies), and at its start kills
the processes that mount one of these images' devices and descend from no live server and from nothing of
its own; then it detaches every device of these images that nothing holds (`LOOP_CLR_FD`: on a device still
in use that only sets autoclear, which the device has already). The start-up log says how many it removed.
"""

from __future__ import annotations

import fcntl
import logging
import os
import select
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from modules.tools.launched import process_start_ticks

log = logging.getLogger(__name__)

LOOP_CLR_FD = 0x4C01
SERVERS = "servers"
GONE_WAIT_S = 5.0  # how long the start waits for the killed processes to be gone


@dataclass(frozen=True)
class Removed:
    processes: int  # left by a server that is gone, killed
    devices: int  # of these images, attached and held by nothing, detached


def register(images_dir: Path) -> int:
    """Record this process as a live server on `images_dir`: the returned descriptor's lock says so until the
    process ends (kept open for its life). The record is locked before it bears its name, so no other start
    ever takes it for a dead server's."""
    folder = images_dir / SERVERS
    folder.mkdir(parents=True, exist_ok=True)
    name = f"{os.getpid()}-{process_start_ticks(os.getpid())}"
    fd = os.open(folder / f".{name}", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.replace(folder / f".{name}", folder / name)
    return fd


def remove_stale(images_dir: Path) -> Removed:
    """Kill what servers that are gone left holding `images_dir`'s images, and detach their free devices.
    Never a process of the host's mount namespace, of this process's or a live server's, nor one that descends
    from a live server or from this process."""
    devices = _devices(images_dir)
    stale = _stale(images_dir, set(devices))
    if stale:  # checked again: a server that started meanwhile recorded itself before it mounted anything
        again = _stale(images_dir, set(devices))
        stale = {pid: started for pid, started in stale.items() if again.get(pid) == started}
    killed, exits = [], []
    for pid, started in stale.items():
        try:
            handle = os.pidfd_open(pid)  # the process itself from here on, whatever its pid becomes
        except OSError:
            continue
        try:
            if process_start_ticks(pid) != started:  # gone, and its pid taken by another
                os.close(handle)
                continue
            name = Path(f"/proc/{pid}/comm").read_text().strip()
            signal.pidfd_send_signal(handle, signal.SIGKILL)
            killed.append(f"{pid} ({name})")
            exits.append(handle)
        except OSError:
            os.close(handle)
    deadline = time.monotonic() + GONE_WAIT_S
    while exits and time.monotonic() < deadline:  # a pidfd reads ready once its process has exited
        ended, _, _ = select.select(exits, [], [], max(0.0, deadline - time.monotonic()))
        for handle in ended:
            exits.remove(handle)
            os.close(handle)
    for handle in exits:
        os.close(handle)
    for name in devices.values():
        _detach_when_free(name)
    detached = len(set(devices) - set(_devices(images_dir)))
    if killed or detached:
        log.warning("removed what a server which is gone had left holding its workspace images: %d processes "
                    "killed (%s), %d loop devices detached", len(killed), ", ".join(killed[:10]), detached)
    return Removed(len(killed), detached)


def _stale(images_dir: Path, devices: set[str]) -> dict[int, int]:
    """The processes that mount one of `devices` and that no live server (nor this process) answers for, with
    their start times."""
    live = _live_servers(images_dir / SERVERS) | {os.getpid()}
    if not devices:
        return {}
    spared = {_namespace(pid) for pid in (1, *live)}
    parents = _parents()
    stale = {}
    mounting: dict[str, bool] = {}  # namespace: whether it mounts one of the devices
    for pid in parents:
        namespace = _namespace(pid)
        if namespace is None or namespace in spared or pid == 1 or _descends(pid, live, parents):
            continue
        if namespace not in mounting:
            mounting[namespace] = _mounts_any(pid, devices)
        started = process_start_ticks(pid) if mounting[namespace] else None
        if started is not None:
            stale[pid] = started
    return stale


def _live_servers(folder: Path) -> set[int]:
    """The pids of the servers whose record is locked; the records of those that are gone are removed."""
    live = set()
    for record in folder.glob("[0-9]*-*"):
        try:
            fd = os.open(record, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            live.add(int(record.name.split("-")[0]))
        else:
            record.unlink(missing_ok=True)
        finally:
            os.close(fd)
    return live


def _devices(images_dir: Path) -> dict[str, str]:
    """The loop devices attached to a file under `images_dir`: `major:minor` as mountinfo shows it, and name."""
    found = {}
    for backing in Path("/sys/block").glob("loop*/loop/backing_file"):
        block = backing.parent.parent
        try:
            if backing.read_text().startswith(f"{images_dir}/"):
                found[(block / "dev").read_text().strip()] = block.name
        except OSError:
            continue
    return found


def _mounts_any(pid: int, devices: set[str]) -> bool:
    try:
        with open(f"/proc/{pid}/mountinfo") as info:
            return any(line.split()[2] in devices for line in info)
    except OSError:
        return False


def _stat_fields(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()  # after the command's name, which may hold anything


def _parents() -> dict[int, int]:
    parents = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                parents[int(name)] = int(_stat_fields(int(name))[1])
            except (OSError, IndexError, ValueError):
                continue
    return parents


def _descends(pid: int, ancestors: set[int], parents: dict[int, int]) -> bool:
    seen = set()
    while pid > 1 and pid not in seen:
        if pid in ancestors:
            return True
        seen.add(pid)
        pid = parents.get(pid, 0)
    return False


def _namespace(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt")
    except OSError:
        return None


def _detach_when_free(name: str) -> None:
    """LOOP_CLR_FD: the device is detached once nothing holds it (at once where nothing does)."""
    try:
        fd = os.open(f"/dev/{name}", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        fcntl.ioctl(fd, LOOP_CLR_FD, 0)
    except OSError:
        pass
    finally:
        os.close(fd)

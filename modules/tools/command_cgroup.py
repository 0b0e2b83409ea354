"""A cgroup of its own for each command: memory and processes limited for the command as a whole (README,
"Command sandbox").

rlimits bound each process: eight processes under a 128 MB limit hold a gigabyte between them. The kernel's
cgroup controllers bound them together (memory.max / pids.max as runc and systemd set them). The server
creates each command's cgroup as a child of its own cgroup and nowhere else: cgroup v2 where the server's
cgroup delegates `memory` and `pids` to its children, else the v1 `memory` and `pids` hierarchies. Where it
may create none (an unprivileged server without a delegated cgroup), the rlimits are the documented fallback
and the start-up line says so.

Each cgroup is named after the server's pid. A cgroup whose processes are still leaving when its command
ends is removed by a reaper thread; whatever a server that died left (killed mid-command, or before its
reaper was done) is killed and removed when the next server starts on the same cgroup.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import signal
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

CGROUP_ROOT = Path("/sys/fs/cgroup")
PREFIX = "chat-cmd-"  # then the creating server's pid: `chat-cmd-<pid>-<name>`
EMPTY_WAIT_S = 1.0  # how long a removal waits for the command's last processes to be gone
IDLE_KEPT = 8  # empty cgroups kept for the next commands: making a memory cgroup costs a command milliseconds


@dataclass(frozen=True)
class CommandCgroup:
    dirs: tuple[Path, ...]  # one per hierarchy (v1) or one (v2)
    pool: CommandCgroups | None = field(default=None, compare=False)  # takes it back for the next command

    def join_argv(self, argv: list[str]) -> list[str]:
        """`argv` run by a shell that first moves itself into the cgroup, so everything it starts is inside."""
        joins = " && ".join(f'echo $$ > "${i + 1}"' for i in range(len(self.dirs)))
        script = f'{joins} && shift {len(self.dirs)} && exec "$@"'
        return ["/bin/sh", "-c", script, "sh", *(str(d / "cgroup.procs") for d in self.dirs), *argv]

    def empty(self) -> bool:
        for folder in self.dirs:
            try:
                if (folder / "cgroup.procs").read_text().strip():
                    return False
            except FileNotFoundError:  # gone already
                continue
            except OSError:
                return False
        return True

    def release(self) -> None:
        """Once its command ended: back to the pool (or removed) if it is empty, else the same soon, off the
        command's path (a sandbox's processes leave their cgroup a few milliseconds after its first process
        was reaped, and no command should wait for that)."""
        if not self.empty():
            _REAPER.put(self)
        elif self.pool is not None:
            self.pool.give_back(self)
        else:
            self.remove()

    def settle(self) -> None:
        """Kill what is left in it and wait (bounded) until it is empty."""
        deadline = time.monotonic() + EMPTY_WAIT_S
        while not self.empty() and time.monotonic() < deadline:
            for folder in self.dirs:
                _kill_members(folder)
            time.sleep(0.005)

    def remove(self) -> None:
        """Kill what is left in it and remove it."""
        self.settle()
        for folder in self.dirs:
            try:
                folder.rmdir()
            except FileNotFoundError:
                pass
            except OSError:
                log.warning("could not remove the command cgroup %s", folder)


def _kill_members(folder: Path) -> None:
    try:
        pids = [int(p) for p in (folder / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


class _Reaper:
    """One thread that settles the cgroups whose processes were still leaving when their command ended."""

    def __init__(self) -> None:
        self._queue: queue.Queue[CommandCgroup] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def put(self, cgroup: CommandCgroup) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="cgroup-reaper", daemon=True)
                self._thread.start()
        self._queue.put(cgroup)

    def _run(self) -> None:
        while True:
            cgroup = self._queue.get()
            cgroup.settle()
            if cgroup.empty() and cgroup.pool is not None:
                cgroup.pool.give_back(cgroup)
            else:
                cgroup.remove()


_REAPER = _Reaper()


def _server_alive(pid: int) -> bool:
    return pid == os.getpid() or Path(f"/proc/{pid}").exists()


def remove_stale(parent: Path) -> list[Path]:
    """Remove the command cgroups that a server which is gone left under `parent` (killed with its commands
    running, or before its reaper was done), killing what is left in them; another live server's stay."""
    removed = []
    for stale in parent.glob(f"{PREFIX}*"):
        owner = stale.name.removeprefix(PREFIX).split("-", 1)[0]
        if owner.isdigit() and _server_alive(int(owner)):
            continue
        CommandCgroup((stale,)).remove()
        if not stale.exists():
            removed.append(stale)
    return removed


def _own_paths() -> dict[str, str]:
    """This process's cgroup per controller (`""` for v2's unified hierarchy), from /proc/self/cgroup."""
    paths: dict[str, str] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return paths
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            paths[name] = path
    return paths


class CommandCgroups:
    """Makes one cgroup per command with the limits, or says why it cannot (`problem`)."""

    def __init__(self, memory_mb: int, max_processes: int, *, root: Path = CGROUP_ROOT, enabled: bool = True,
                 own: dict[str, str] | None = None):
        self.memory_bytes = memory_mb * 1024 * 1024
        self.max_processes = max_processes
        self.mode: str | None = None
        self.problem: str | None = None
        self.stale_removed: list[Path] = []  # what a server that died had left, removed at this start
        self._parents: dict[str, Path] = {}
        self._idle: list[CommandCgroup] = []
        self._idle_lock = threading.Lock()
        own = _own_paths() if own is None else own
        if not enabled:
            self.problem = "not asked for"
        elif "memory" in own and "pids" in own and (root / "memory").is_dir() and (root / "pids").is_dir():
            self._try({"memory": root / "memory" / own["memory"].lstrip("/"),
                       "pids": root / "pids" / own["pids"].lstrip("/")}, "cgroup v1 (memory, pids)")
        elif "" in own and (root / "cgroup.controllers").is_file():
            parent = root / own[""].lstrip("/")
            try:
                delegated = (parent / "cgroup.subtree_control").read_text().split()
            except OSError as exc:
                delegated, self.problem = [], f"cgroup v2: {exc}"
            if {"memory", "pids"} <= set(delegated):
                self._try({"unified": parent}, "cgroup v2 (memory.max, pids.max)")
            elif not self.problem:
                self.problem = f"cgroup v2: {parent} does not delegate memory and pids to its children"
        else:
            self.problem = "no cgroup memory and pids controllers are mounted"

    def _try(self, parents: dict[str, Path], mode: str) -> None:
        for parent in parents.values():
            self.stale_removed += remove_stale(parent)
        if self.stale_removed:
            log.info("removed %d command cgroups that a server which is gone had left", len(self.stale_removed))
        self._parents = parents
        try:
            probe = self.create("probe")
        except OSError as exc:
            self._parents = {}
            self.problem = f"{mode}: cannot create a child of this server's cgroup ({exc})"
            return
        probe.remove()
        self.mode = mode
        atexit.register(self.drop_idle)

    def drop_idle(self) -> None:
        """Remove the kept cgroups (at exit; what a killed server kept, the next start removes)."""
        with self._idle_lock:
            idle, self._idle = self._idle, []
        for cgroup in idle:
            cgroup.remove()

    def give_back(self, cgroup: CommandCgroup) -> None:
        """An empty cgroup whose command ended: kept for the next command, or removed when enough are kept."""
        with self._idle_lock:
            if len(self._idle) < IDLE_KEPT:
                self._idle.append(cgroup)
                return
        cgroup.remove()

    def take(self) -> CommandCgroup:
        """A cgroup for a new command: a kept one (same limits, no process in it), else a new one."""
        while True:
            with self._idle_lock:
                kept = self._idle.pop() if self._idle else None
            if kept is None:
                return self.create(uuid.uuid4().hex)
            if all(folder.is_dir() for folder in kept.dirs):  # an older server's clean-up may have taken it
                return kept
            kept.remove()

    def create(self, name: str) -> CommandCgroup:
        parents = self._parents
        if not parents:
            raise OSError(self.problem or "no cgroup")
        made: list[Path] = []
        try:
            for kind, parent in parents.items():
                folder = parent / f"{PREFIX}{os.getpid()}-{name}"
                folder.mkdir()
                made.append(folder)
                if kind == "memory":
                    (folder / "memory.limit_in_bytes").write_text(str(self.memory_bytes))
                    swap = folder / "memory.memsw.limit_in_bytes"
                    if swap.exists():
                        swap.write_text(str(self.memory_bytes))
                elif kind == "pids":
                    (folder / "pids.max").write_text(str(self.max_processes))
                else:
                    (folder / "memory.max").write_text(str(self.memory_bytes))
                    if (folder / "memory.swap.max").exists():
                        (folder / "memory.swap.max").write_text("0")
                    (folder / "pids.max").write_text(str(self.max_processes))
        except OSError:
            CommandCgroup(tuple(made)).remove()
            raise
        return CommandCgroup(tuple(made), self)

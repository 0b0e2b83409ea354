"""A cgroup of its own for each command: memory and processes limited for the command as a whole (README,
"Command sandbox").

rlimits bound each process: eight processes under a 128 MB limit hold a gigabyte between them. The kernel's
cgroup controllers bound them together (memory.max / pids.max as runc and systemd set them). The server
creates each command's cgroup as a child of its own cgroup and nowhere else: cgroup v2 where the server's
cgroup delegates `memory` and `pids` to its children, else the v1 `memory` and `pids` hierarchies. Where it
may create none (an unprivileged server without a delegated cgroup), the rlimits are the documented fallback
and the start-up line says so.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

CGROUP_ROOT = Path("/sys/fs/cgroup")
PREFIX = "chat-cmd-"
EMPTY_WAIT_S = 1.0  # how long a removal waits for the command's last processes to be gone


@dataclass(frozen=True)
class CommandCgroup:
    dirs: tuple[Path, ...]  # one per hierarchy (v1) or one (v2)

    def join_argv(self, argv: list[str]) -> list[str]:
        """`argv` run by a shell that first moves itself into the cgroup, so everything it starts is inside."""
        joins = " && ".join(f'echo $$ > "${i + 1}"' for i in range(len(self.dirs)))
        script = f'{joins} && shift {len(self.dirs)} && exec "$@"'
        return ["/bin/sh", "-c", script, "sh", *(str(d / "cgroup.procs") for d in self.dirs), *argv]

    def remove(self) -> None:
        """Kill what is left in it and remove it."""
        deadline = time.monotonic() + EMPTY_WAIT_S
        for folder in self.dirs:
            while True:
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        log.warning("could not remove the command cgroup %s", folder)
                        break
                    _kill_members(folder)
                    time.sleep(0.005)


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

    def __init__(self, memory_mb: int, max_processes: int, *, root: Path = CGROUP_ROOT, enabled: bool = True):
        self.memory_bytes = memory_mb * 1024 * 1024
        self.max_processes = max_processes
        self.mode: str | None = None
        self.problem: str | None = None
        self._parents: dict[str, Path] = {}
        own = _own_paths()
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
            for stale in parent.glob(f"{PREFIX}*"):  # left by a server that died: empty ones go
                try:
                    stale.rmdir()
                except OSError:
                    pass
        self._parents = parents
        try:
            probe = self.create(f"probe-{os.getpid()}")
        except OSError as exc:
            self._parents = {}
            self.problem = f"{mode}: cannot create a child of this server's cgroup ({exc})"
            return
        probe.remove()
        self.mode = mode

    def create(self, name: str) -> CommandCgroup:
        parents = self._parents
        if not parents:
            raise OSError(self.problem or "no cgroup")
        made: list[Path] = []
        try:
            for kind, parent in parents.items():
                folder = parent / f"{PREFIX}{name}"
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
        return CommandCgroup(tuple(made))

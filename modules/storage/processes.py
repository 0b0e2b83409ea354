"""Server processes sharing one database: registration, heartbeats, and which ones are gone.

A process on this host is gone as soon as its pid is (or when its pid is this process's: a previous life of it);
one on another host when its heartbeat is older than the timeout. Work owned by a gone process (tasks,
background commands) is taken over by a live one.
"""

from __future__ import annotations

import os
import socket

from sqlalchemy import delete, select, update

from modules.storage.db import Database
from modules.storage.models import ForegroundCommand, ServerProcess
from modules.storage.records import new_id, now
from modules.storage.results import rowcount


def _host_identity() -> str:
    """The host name plus the pid namespace: processes in other namespaces (containers sharing a host
    name) are judged by heartbeat, never by a pid that means something else there."""
    try:
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        namespace = 0
    return f"{socket.gethostname()}/pidns:{namespace}"[:255]


HOST = _host_identity()


def register(db: Database) -> str:
    process_id = new_id()
    ts = now()
    with db.write() as s:
        s.add(ServerProcess(id=process_id, host=HOST, pid=os.getpid(), started_at=ts, heartbeat_at=ts))
    return process_id


def heartbeat(db: Database, process_id: str) -> None:
    """Beat, on the database's control connection (never behind ordinary work); a process that a peer
    wrongly judged gone (and forgot) registers again."""
    with db.write_control() as s:
        beat = s.execute(update(ServerProcess).where(ServerProcess.id == process_id).values(heartbeat_at=now()))
        if rowcount(beat) == 0:
            ts = now()
            s.add(ServerProcess(id=process_id, host=HOST, pid=os.getpid(), started_at=ts, heartbeat_at=ts))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def is_gone(row: ServerProcess, timeout_s: float) -> bool:
    """Gone when its heartbeat is stale, or at once when it ran on this host and its pid is gone. `row` is another
    process's (callers leave their own out): on this host with this process's pid, it is a previous life of this
    process (a restarted container's server has its old pid, in a pid namespace that may reuse the old one's
    number), so gone at once too."""
    if now() - row.heartbeat_at > timeout_s:
        return True
    return row.host == HOST and (row.pid == os.getpid() or not _pid_alive(row.pid))


def gone_processes(db: Database, me: str, timeout_s: float) -> dict[str, str]:
    """Process id -> host of every registered process that is gone."""
    with db.read() as s:
        rows = list(s.scalars(select(ServerProcess).where(ServerProcess.id != me)))
    return {row.id: row.host for row in rows if is_gone(row, timeout_s)}


def alive_processes(db: Database, me: str, timeout_s: float) -> set[str]:
    with db.read() as s:
        rows = list(s.scalars(select(ServerProcess)))
    return {row.id for row in rows if row.id == me or not is_gone(row, timeout_s)}


def forget(db: Database, process_ids: set[str] | dict[str, str]) -> None:
    if not process_ids:
        return
    with db.write() as s:
        for row in s.scalars(select(ServerProcess).where(ServerProcess.id.in_(process_ids))):
            s.delete(row)
        # Their foreground commands died with them: no longer counted by the per-user cap.
        s.execute(delete(ForegroundCommand).where(ForegroundCommand.owner.in_(process_ids)))

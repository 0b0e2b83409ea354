"""The CPU time PostgreSQL's backends spent for a run: the server shares this machine's cores with the process
under test, so its work per message bounds the rate as much as the process's own.

Read from /proc/PID/stat of every backend connected to the run's database (the server runs here); a backend
that appeared during the run counts from zero, one that ended during it is missed (the pool keeps its
connections, so few do)."""

from __future__ import annotations

import os

import psycopg

TICKS_PER_S = os.sysconf("SC_CLK_TCK")


class ServerCpu:
    def __init__(self, admin_dsn: str, database: str):
        self._dsn, self._database = admin_dsn, database
        self._start: dict[int, int] = {}

    def start(self) -> None:
        self._start = self._ticks()

    def seconds(self) -> float:
        """CPU seconds (user + system) of the database's backends since `start`."""
        now = self._ticks()
        return sum(ticks - self._start.get(pid, 0) for pid, ticks in now.items()) / TICKS_PER_S

    def _ticks(self) -> dict[int, int]:
        with psycopg.connect(self._dsn, autocommit=True, connect_timeout=5) as conn:
            pids = [row[0] for row in conn.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s",
                                                   (self._database,))]
        ticks: dict[int, int] = {}
        for pid in pids:
            try:
                with open(f"/proc/{pid}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:  # ended meanwhile, or another machine's server
                continue
            ticks[pid] = int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
        return ticks

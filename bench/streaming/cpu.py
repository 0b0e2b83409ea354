"""`bench/load.py`: the CPU seconds each part of the run spent in the measured window (issue 26).

Streams per second only mean throughput when something is saturated, and on a 2-core machine the
servers share the cores with the driver, the scripted model, PostgreSQL, Redis and nginx. So each run
reads every component's utime + stime (/proc/<pid>/stat, with its reaped children's) at the send and at
the end of the streams, and the machine's busy and idle time (/proc/stat), and prints them next to the
streams per second. The servers' CPU per stream (streams per server-CPU-second) isolates how the product
itself scales; the CPU per stream of everything together says how many streams per second the cores could
carry at most.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")
CORES = os.cpu_count() or 1
PROC = Path("/proc")
PG_SHARED = ("checkpointer", "background writer", "walwriter", "autovacuum launcher",
             "logical replication launcher")
SERVER = "server"  # components whose label starts with this are the product's processes


def _stat(pid: int) -> tuple[int, int] | None:
    """(utime + stime of the process and of its children it has reaped, start time) in ticks, or None when the
    process is gone. The reaped children count: a PostgreSQL backend that a pool closed within the window is
    gone by its end, and its CPU with it, but the postmaster has reaped it."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # after the command, which may hold spaces
    return sum(int(v) for v in fields[11:15]), int(fields[19])


def _processes() -> list[tuple[int, int, str, str]]:
    """(pid, parent pid, command name, command line) of every process."""
    out = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        out.append((int(entry.name), int(stat[stat.rindex(")") + 2:].split()[1]), comm, cmdline))
    return out


def children(pid: int) -> list[int]:
    return [p for p, parent, _, _ in _processes() if parent == pid]


def postgres(database: str) -> dict[str, list[int]]:
    """The backends of `database` and PostgreSQL's shared processes (postmaster, WAL writer, ...): other
    databases' backends (other work on this machine) are left out."""
    backends, shared = [], []
    for pid, _, comm, cmdline in _processes():
        if comm != "postgres" and not cmdline.startswith("postgres"):
            continue
        if f" {database} " in cmdline:
            backends.append(pid)
        elif "postgres: " not in cmdline or cmdline.endswith(PG_SHARED):
            shared.append(pid)
    return {"postgresql backends": backends, "postgresql shared": shared}


def postgres_counts(database: str) -> dict[str, int]:
    """Connections opened to `database` so far, and its transactions (pg_stat_database): a pool that opens and
    closes its overflow connections under load costs a backend's fork and a login each time, and a group commit
    shared by fewer writers (a process holds fewer of the streams) costs more transactions per stream."""
    import psycopg

    from test.db_urls import PG_ADMIN

    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        row = conn.execute("SELECT sessions, xact_commit, xact_rollback FROM pg_stat_database WHERE datname = %s",
                           (database,)).fetchone() or (0, 0, 0)
    return {"postgresql connections opened": int(row[0]), "postgresql commits": int(row[1]),
            "postgresql rollbacks": int(row[2])}


def database_counts(urls: list[str]) -> dict[str, int]:
    """The servers' database statements and commits so far (their `/metrics`, summed): the product's own cost
    that no latency shows at low load, counted rather than timed."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    names = {"chat_database_statements": "database statements", "chat_database_commits": "database commits"}
    counts = dict.fromkeys(names.values(), 0)
    for url in urls:
        with urllib.request.urlopen(f"{url}/metrics", timeout=10) as answer:
            for family in text_string_to_metric_families(answer.read().decode()):
                if family.name in names:
                    counts[names[family.name]] += sum(int(sample.value) for sample in family.samples)
    return counts


def redis_server() -> dict[str, list[int]]:
    return {"redis": [pid for pid, _, comm, _ in _processes() if comm == "redis-server"]}


@dataclasses.dataclass(frozen=True)
class Machine:
    busy: int  # ticks, every core
    idle: int
    steal: int  # taken by the hypervisor


def machine() -> Machine:
    values = [int(v) for v in (PROC / "stat").read_text().splitlines()[0].split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = (values + [0] * 8)[:8]
    return Machine(user + nice + system + irq + softirq, idle + iowait, steal)


@dataclasses.dataclass(frozen=True)
class CpuUse:
    """What one run's window cost: CPU seconds per component, the machine's, and the streams done."""

    wall_s: float
    seconds: dict[str, float]
    machine_busy_s: float
    machine_steal_s: float
    streams: int
    events: int = 0  # delivered to the clients: fewer per stream when a loaded server coalesces more chunks
    counts: dict[str, int] = dataclasses.field(default_factory=dict)  # other counters over the window

    @property
    def servers_s(self) -> float:
        return sum(s for name, s in self.seconds.items() if name.startswith(SERVER))

    @property
    def rest_s(self) -> float:
        """Everything the run needs besides the servers: driver, model, database, Redis, nginx."""
        return sum(s for name, s in self.seconds.items() if not name.startswith(SERVER))

    @property
    def others_s(self) -> float:
        """Busy time of the machine outside the run's components: other work on this machine, the kernel."""
        return max(0.0, self.machine_busy_s - self.servers_s - self.rest_s)


class CpuMeter:
    """Reads the components' CPU ticks at `start()` and at `stop()`; `components()` names them (resolved at
    both ends: a process that starts in the window counts from zero, one that ends in it is lost)."""

    def __init__(self, components: Callable[[], dict[str, list[int]]],
                 counters: Callable[[], dict[str, int]] = dict):
        self._components = components
        self._counters = counters
        self._counts: dict[str, int] = {}
        self._before: dict[int, tuple[int, int]] = {}
        self._machine: Machine | None = None
        self._started = 0.0
        self._use: CpuUse | None = None

    def start(self) -> None:
        if self._machine is not None:
            return
        self._started = time.monotonic()
        self._machine = machine()
        self._counts = self._counters()
        self._before = {pid: got for pids in self._components().values() for pid in pids
                        if (got := _stat(pid)) is not None}

    def stop(self) -> None:
        """Ends the window (once; again is a no-op)."""
        if self._machine is None or self._use is not None:
            return
        wall = time.monotonic() - self._started
        seconds: dict[str, float] = {}
        for name, pids in self._components().items():
            ticks = 0
            for pid in set(pids):
                now = _stat(pid)
                if now is None:
                    continue
                before = self._before.get(pid)
                ticks += now[0] - (before[0] if before and before[1] == now[1] else 0)
            seconds[name] = ticks / TICKS
        end = machine()
        counts = {name: n - self._counts.get(name, 0) for name, n in self._counters().items()}
        self._use = CpuUse(wall, seconds, (end.busy - self._machine.busy) / TICKS,
                           (end.steal - self._machine.steal) / TICKS, 0, counts=counts)

    def use(self, streams: int, events: int) -> CpuUse | None:
        """The window's figures with the streams it completed and the events it delivered; None when it never
        started or ended."""
        return None if self._use is None else dataclasses.replace(self._use, streams=streams, events=events)


def report(runs: list[tuple[str, CpuUse]]) -> str:
    """The CPU table of the runs side by side, and what bounds streams per second on this machine."""
    names = list(dict.fromkeys(n for _, use in runs for n in use.seconds))
    width, column = 31, 25
    head = f"{'CPU seconds in the window':{width}}" + "".join(f" {label.split(' (')[0]:>{column}}" for label, _ in runs)
    lines = ["", head]

    def row(name: str, values: list[str]) -> None:
        lines.append(f"{name:{width}}" + "".join(f" {v:>{column}}" for v in values))

    row("wall", [f"{u.wall_s:.1f} s" for _, u in runs])
    for name in names:
        row(name, [f"{u.seconds[name]:.1f} ({u.seconds[name] / u.wall_s:.2f} cores)" if name in u.seconds else "-"
                   for _, u in runs])
    row("all servers", [f"{u.servers_s:.1f} ({u.servers_s / u.wall_s:.2f} cores)" for _, u in runs])
    row("driver, model, db, redis, nginx", [f"{u.rest_s:.1f} ({u.rest_s / u.wall_s:.2f} cores)" for _, u in runs])
    row("other work on the machine", [f"{u.others_s:.1f} ({u.others_s / u.wall_s:.2f} cores)" for _, u in runs])
    row(f"machine busy (of {CORES} cores)",
        [f"{u.machine_busy_s:.1f} ({u.machine_busy_s / u.wall_s:.2f} cores)" for _, u in runs])
    row("stolen by the hypervisor", [f"{u.machine_steal_s:.1f} s" for _, u in runs])
    row("servers' share of the CPU", [f"{u.servers_s / (u.wall_s * CORES):.0%}" for _, u in runs])
    row("streams/s", [f"{u.streams / u.wall_s:.2f}" for _, u in runs])
    row("streams per server-CPU-s", [f"{u.streams / u.servers_s:.2f}" if u.servers_s else "-" for _, u in runs])
    row("server CPU s per stream", [f"{u.servers_s / u.streams * 1000:.0f} ms" if u.streams else "-" for _, u in runs])
    row("rest CPU s per stream", [f"{u.rest_s / u.streams * 1000:.0f} ms" if u.streams else "-" for _, u in runs])
    row("events delivered per stream", [f"{u.events / u.streams:.1f}" if u.streams else "-" for _, u in runs])
    for name in dict.fromkeys(n for _, use in runs for n in use.counts):
        row(name, [f"{u.counts[name]} ({u.counts[name] / u.streams:.1f} a stream)" if name in u.counts and u.streams
                   else "-" for _, u in runs])
    lines += ceilings(runs)
    return "\n".join(lines)


def ceilings(runs: list[tuple[str, CpuUse]]) -> list[str]:
    """What the cores allow: N processes can use at most N cores, and the whole run at most the machine's
    cores less the other work; each stream costs the servers' and the rest's CPU per stream of its run."""
    if not runs or not all(u.streams and u.servers_s for _, u in runs):
        return []
    one = runs[0][1]
    out = ["what bounds streams/s (CPU per stream of each run; the cores the run could have had):"]
    for label, u in runs:
        processes = sum(1 for name in u.seconds if name.startswith(SERVER))
        per_stream = (u.servers_s + u.rest_s) / u.streams
        free_cores = CORES - u.others_s / u.wall_s
        by_machine = free_cores / per_stream
        by_processes = processes / (u.servers_s / u.streams)
        out.append(f"  {label}: at most {min(by_machine, by_processes):.1f} streams/s "
                   f"(the machine's {free_cores:.2f} free cores / {per_stream * 1000:.0f} ms CPU per stream = "
                   f"{by_machine:.1f}; {processes} process(es) at one core each = {by_processes:.1f}); "
                   f"measured {u.streams / u.wall_s:.2f}")
    for label, u in runs[1:]:
        efficiency = (u.streams / u.servers_s) / (one.streams / one.servers_s)
        out.append(f"  {label}: streams per server-CPU-second {efficiency:.2f}x one process's (the product's own "
                   "scaling, whatever the cores left to it)")
        out.append(f"  {label}: on all {CORES} cores with no other work, these CPU costs per stream allow "
                   f"{_idle_ceiling(u):.1f} streams/s against one process's {_idle_ceiling(one):.1f}: at most "
                   f"{_idle_ceiling(u) / _idle_ceiling(one):.2f}x")
    return out


def _idle_ceiling(u: CpuUse) -> float:
    """Streams/s the run's CPU per stream allows on the whole machine: the servers at one core each at most, and
    every part of the run together on all the cores."""
    processes = sum(1 for name in u.seconds if name.startswith(SERVER))
    return min(CORES / ((u.servers_s + u.rest_s) / u.streams), processes / (u.servers_s / u.streams))


SPIN = "n = 0\nfor i in range({loops}):\n    n += i * i\n"


@dataclasses.dataclass(frozen=True)
class Scaling:
    work: float  # N processes at once against one: work done per second of wall time
    cpu_per_work: float  # N at once against one: CPU seconds one unit of work took


def machine_scaling(processes: int, loops: int = 6_000_000) -> Scaling:
    """How much more CPU-bound work `processes` Python processes at once complete than one, per second, on this
    machine now, and how much more CPU each unit of it took: the ceiling that the cores (shared with other work,
    perhaps with the host's other guests) set for N servers, whatever the product does; the CPU per unit of work
    rises when cores that share caches or a host are all busy, and a server's CPU per stream with it. A fixed
    loop in one process, then in N at once."""
    import resource
    import subprocess
    import sys

    def run(n: int) -> tuple[float, float]:
        started, cpu_before = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
        spinners = [subprocess.Popen([sys.executable, "-c", SPIN.format(loops=loops)]) for _ in range(n)]
        for spinner in spinners:
            spinner.wait()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        used = after.ru_utime + after.ru_stime - cpu_before.ru_utime - cpu_before.ru_stime
        return time.monotonic() - started, used / n

    wall_one, cpu_one = run(1)
    wall_n, cpu_n = run(processes)
    return Scaling(processes * wall_one / wall_n, cpu_n / cpu_one if cpu_one else math.nan)

"""Benchmark: the multi-agent message router (docs/ARCHITECTURE.md: receiver-decided routing).

Fan-in: S sender agents (S = 1, 10, 100) send messages at once to one receiver (the master)
running a turn. Like the tool loop, before each model call the receiver drains its queue into
its history (`consume_pending_messages`, one transaction), reads what is new in its history for the
request (a turn's `HistoryTail`), then "calls the model" (sleeps `--model-ms`). Each message is routed
by `MessageRouter.route_message` (queued durably, delivered by the receiver's state).

Figures, per database (SQLite file in WAL mode; PostgreSQL on 127.0.0.1:5432 in a throw-away
database) and sender count:

- msgs/s: routed messages per second, from the first send to the last message visible;
- latency p50/p99: from the start of `route_message` to the moment the receiver's next model
  request that holds the message is built (includes waiting for the receiver's current
  "model call" to end: about model-ms / 2 on average);
- send p50: how long `route_message` takes for the sender (until the message is safe);
- db% send / db% recv: share of the senders' `route_message` time, and of the receiver's
  non-model time, spent inside the database layer (`Database.read()`/`write()` sessions:
  pool checkout, the SQLite writer lock, statements, commit);
- sql% / commit% / ping%: the parts of that spent executing statements, committing and pinging;
- stmts/msg: statements executed per routed message (sends and drains together);
- trips/msg: round trips to PostgreSQL per routed message (bench/routing/round_trips.py), each a green wait;
  b+s+e: the BEGINs, statements and COMMITs or ROLLBACKs among them (per message).

- cpu us/msg: this process's CPU time (user + system) per routed message, over the run (the database
  server's own CPU is not in it; SQLite's is); pg us/msg: the CPU time of PostgreSQL's backends for the run's
  database per routed message (bench/routing/server_cpu.py): the server shares the machine's cores;
- load: the 1-minute load average as the scenario ends (the machine is shared).

Every run checks each message is delivered exactly once, in order per sender. It composes the
product in-process under eventlet, monkey-patched as `run.py` patches the server (senders and receiver are
green threads, psycopg waits with select); `--threads` runs them as OS threads instead (the old mode).

Run: `.venv/bin/python bench/router.py` (about 1 minute; `--quick`, `--threads`, `--help`); PostgreSQL is
skipped when unreachable.
"""

from __future__ import annotations

import os
import sys

GREEN = "--threads" not in sys.argv[1:]  # decided before anything imports the standard library's threading
if GREEN:
    os.environ.setdefault("PSYCOPG_WAIT_FUNC", "wait_select")  # as run.py: psycopg's wait made cooperative
    import eventlet

    eventlet.monkey_patch()

import argparse  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from collections import defaultdict  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from contextlib import contextmanager  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `python bench/router.py` puts bench/ first, not the project
    sys.path.insert(0, str(ROOT))

from sqlalchemy import make_url  # noqa: E402

from bench.routing.clock import DbClock  # noqa: E402
from bench.routing.round_trips import RoundTrips  # noqa: E402
from bench.routing.server_cpu import ServerCpu  # noqa: E402
from modules.agents.profiles import load_profiles  # noqa: E402
from modules.context.history_tail import HistoryTail  # noqa: E402
from modules.multi_agent import agent_state  # noqa: E402
from modules.multi_agent.agent_state import AgentStates  # noqa: E402
from modules.multi_agent.message_router import INJECTED_INLINE, MessageRouter, PendingMessage  # noqa: E402
from modules.statuses import MessageSource  # noqa: E402
from modules.storage import conversations  # noqa: E402
from modules.storage import messages as message_store  # noqa: E402
from modules.storage import pending_messages as queue  # noqa: E402
from modules.storage.db import Database  # noqa: E402
from modules.storage.message_meta import MessageMeta  # noqa: E402
from modules.storage.users import get_or_create_user  # noqa: E402
from modules.sub_agent.manager import SubAgentManager  # noqa: E402
from modules.tools.agent_tools import AGENT_TOOLS  # noqa: E402
from modules.tools.run_command import RUN_COMMAND  # noqa: E402

SENDER_COUNTS = (1, 10, 100)
RUN_DEADLINE_S = 60.0


# -- one scenario ----------------------------------------------------------------------
@dataclass
class Result:
    backend: str
    senders: int
    messages: int
    elapsed_s: float
    latencies_ms: list[float]
    send_ms: list[float]
    send_busy_s: float
    recv_busy_s: float
    layer: dict[str, float]
    sql: dict[str, float]
    commit: dict[str, float]
    ping: dict[str, float]
    statements: int
    commits: int
    drains: int
    cpu_s: float
    load: float
    trips: tuple[int, int, int] | None  # round trips to PostgreSQL: begins, statements, ends (None on SQLite)
    server_cpu_s: float | None  # PostgreSQL's backends (None on SQLite)
    errors: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.messages / self.elapsed_s if self.elapsed_s else 0.0


def _pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


@dataclass
class PgProbes:
    """What PostgreSQL is counted with: round trips and its backends' CPU time."""

    trips: RoundTrips
    cpu: ServerCpu


def run_scenario(db: Database, clock: DbClock, pg: PgProbes | None, backend: str, senders: int,
                 per_sender: int, model_s: float) -> Result:
    states = AgentStates(db)
    router = MessageRouter(db)
    user = get_or_create_user(db, "bench")
    conv, master = conversations.create_conversation(db, user.id, f"bench {senders}")
    profiles = load_profiles(None, {t.name for t in (RUN_COMMAND, *AGENT_TOOLS)})
    manager = SubAgentManager(db, profiles)
    agents = [manager.create_sub_agent(master, "InfoAgent", "send") for _ in range(senders)]
    states.transition(master.id, agent_state.RUNNING)
    total = senders * per_sender

    sent_at: dict[str, float] = {}
    visible_at: dict[str, float] = {}
    send_ms: list[float] = []
    errors: list[str] = []
    busy = {"send": 0.0, "recv": 0.0}
    drains = 0
    lock = threading.Lock()
    barrier = threading.Barrier(senders + 1)
    clock.reset()
    if pg is not None:
        pg.trips.reset()
        pg.cpu.start()

    def sender(agent) -> None:
        clock.role("send")
        barrier.wait()
        mine = 0.0
        for i in range(per_sender):
            msg = PendingMessage.new(conversation_id=conv.id, target_agent_id=master.id, type="message",
                                     content=f"{agent.display_name} #{i}", source_display_name=agent.display_name,
                                     source_agent_id=agent.id, meta=MessageMeta(source=MessageSource.AGENT_MESSAGE))
            start = time.perf_counter()
            with lock:
                sent_at[msg.id] = start
            routed = router.route_message(master.id, msg)
            took = time.perf_counter() - start
            mine += took
            with lock:
                send_ms.append(took * 1000)
            if routed.delivery != INJECTED_INLINE:
                errors.append(f"unexpected delivery {routed.delivery}")
        with lock:
            busy["send"] += mine

    def receiver() -> None:
        nonlocal drains
        clock.role("recv")
        barrier.wait()
        deadline = time.monotonic() + RUN_DEADLINE_S
        history = HistoryTail(master.id)
        while len(visible_at) < total and time.monotonic() < deadline:
            start = time.perf_counter()
            drained = router.consume_pending_messages(master.id, conv.id, "bench-turn")
            history.read(db, -1)  # the next model request's history
            built = time.perf_counter()
            busy["recv"] += built - start
            drains += 1
            for m in drained:
                if m.message_id in visible_at:
                    errors.append(f"{m.message_id} delivered twice")
                visible_at[m.message_id] = built
            time.sleep(model_s)  # the model call

    threads = [threading.Thread(target=sender, args=(a,), daemon=True) for a in agents]
    threads.append(threading.Thread(target=receiver, daemon=True))
    cpu_start = time.process_time()
    for t in threads:
        t.start()
    for t in threads:
        t.join(RUN_DEADLINE_S + 10)
    cpu_s = time.process_time() - cpu_start
    trips = None if pg is None else (pg.trips.begins, pg.trips.statements, pg.trips.ends)
    server_cpu_s = None if pg is None else pg.cpu.seconds()
    if any(t.is_alive() for t in threads) or len(visible_at) < total:
        errors.append(f"only {len(visible_at)} of {total} messages became visible in time")

    # the router's promise: once each, in order per sender
    history = [m for m in message_store.list_messages(db, master.id) if m.role == "user"]
    per_sender_seen: dict[str, list[int]] = defaultdict(list)
    for m in history:
        per_sender_seen[m.meta["from_agent"]].append(int((m.content or "").rpartition("#")[2]))
    if len(history) != total or len({m.message_id for m in history}) != total:
        errors.append(f"history holds {len(history)} messages for {total} sent")
    if any(seq != list(range(per_sender)) for seq in per_sender_seen.values()):
        errors.append("a sender's messages were reordered")
    if queue.list_queued(db, master.id):
        errors.append("messages left in the queue")

    first = min(sent_at.values())
    last = max(visible_at.values()) if visible_at else first
    latencies = [(visible_at[i] - sent_at[i]) * 1000 for i in visible_at]
    return Result(backend, senders, total, last - first, latencies, send_ms, busy["send"], busy["recv"],
                  dict(clock.layer), dict(clock.sql), dict(clock.commit), dict(clock.ping),
                  clock.statements["send"] + clock.statements["recv"], clock.commits["send"] + clock.commits["recv"],
                  drains, cpu_s, os.getloadavg()[0], trips, server_cpu_s, errors)


# -- databases -------------------------------------------------------------------------
PG_ADMIN = "host=127.0.0.1 port=5432 user=postgres dbname=postgres"


@contextmanager
def database(backend: str, tmp: Path) -> Iterator[Database]:
    name = f"bench_router_{int(time.time() * 1000) % 10**9}"
    if backend == "sqlite":
        db = Database(f"sqlite:///{tmp / (name + '.db')}")
        try:
            db.migrate()
            yield db
        finally:
            db.dispose()
        return
    import psycopg

    with psycopg.connect(PG_ADMIN, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        db = Database(f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}")
        try:
            db.migrate()
            yield db
        finally:
            db.dispose()
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def postgres_available() -> str | None:
    try:
        import psycopg

        with psycopg.connect(PG_ADMIN, connect_timeout=3):
            return None
    except Exception as exc:  # noqa: BLE001 - any failure means "skip PostgreSQL"
        return str(exc).strip().splitlines()[0]


# -- the table ---------------------------------------------------------------------------
HEADER = (f"{'database':<11}{'senders':>8}{'msgs':>7}{'msgs/s':>9}{'p50 ms':>9}{'p99 ms':>9}"
          f"{'send p50':>10}{'db% send':>10}{'db% recv':>10}{'sql%':>7}{'commit%':>9}{'ping%':>7}{'stmts/msg':>11}"
          f"{'txn/msg':>9}{'trips/msg':>10}{'b+s+e':>16}{'drains':>8}{'cpu us/msg':>11}{'pg us/msg':>10}{'load':>6}"
          "  check")


def row(r: Result) -> str:
    send_db = r.layer.get("send", 0.0) / r.send_busy_s if r.send_busy_s else 0.0
    recv_db = r.layer.get("recv", 0.0) / r.recv_busy_s if r.recv_busy_s else 0.0
    layer = r.layer.get("send", 0.0) + r.layer.get("recv", 0.0)
    sql = (r.sql.get("send", 0.0) + r.sql.get("recv", 0.0)) / layer if layer else 0.0
    commit = (r.commit.get("send", 0.0) + r.commit.get("recv", 0.0)) / layer if layer else 0.0
    ping = (r.ping.get("send", 0.0) + r.ping.get("recv", 0.0)) / layer if layer else 0.0
    per_msg, parts = f"{'-':>10}", f"{'-':>16}"
    if r.trips is not None:
        per_msg = f"{sum(r.trips) / r.messages:>10.2f}"
        parts = f"{'+'.join(f'{n / r.messages:.2f}' for n in r.trips):>16}"
    server = f"{r.server_cpu_s / r.messages * 1e6:>10.0f}" if r.server_cpu_s is not None else f"{'-':>10}"
    check = "ok" if not r.errors else "FAIL: " + "; ".join(sorted(set(r.errors))[:3])
    return (f"{r.backend:<11}{r.senders:>8}{r.messages:>7}{r.rate:>9.0f}{_pct(r.latencies_ms, 50):>9.1f}"
            f"{_pct(r.latencies_ms, 99):>9.1f}{statistics.median(r.send_ms):>10.2f}{send_db:>10.0%}"
            f"{recv_db:>10.0%}{sql:>7.0%}{commit:>9.0%}{ping:>7.0%}{r.statements / r.messages:>11.1f}"
            f"{r.commits / r.messages:>9.2f}{per_msg}{parts}{r.drains:>8}{r.cpu_s / r.messages * 1e6:>11.0f}"
            f"{server}{r.load:>6.1f}  {check}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1000,
                        help="messages per scenario, split over the senders (default 1000)")
    parser.add_argument("--model-ms", type=float, default=10.0,
                        help="duration of the receiver's simulated model call (default 10)")
    parser.add_argument("--senders", type=int, nargs="+", default=list(SENDER_COUNTS))
    parser.add_argument("--backends", nargs="+", default=["sqlite", "postgresql"],
                        choices=["sqlite", "postgresql"])
    parser.add_argument("--quick", action="store_true", help="100 messages per scenario")
    parser.add_argument("--threads", action="store_true",
                        help="senders and receiver as OS threads, without eventlet (default: green threads)")
    args = parser.parse_args(argv)
    total = 100 if args.quick else args.messages

    print(f"router fan-in: N senders -> 1 running receiver; {total} messages per scenario; "
          f"receiver model call {args.model_ms:g} ms; {'green threads (eventlet)' if GREEN else 'OS threads'}; "
          f"load {os.getloadavg()[0]:.1f}")
    print(HEADER)
    failed = False
    results: list[Result] = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-router-") as tmp:
        for backend in args.backends:
            if backend == "postgresql" and (why := postgres_available()) is not None:
                print(f"{backend:<11}skipped: PostgreSQL not reachable at 127.0.0.1:5432 ({why})")
                continue
            with database(backend, Path(tmp)) as db:
                clock = DbClock()
                clock.attach(db)
                pg = None
                if backend == "postgresql":
                    pg = PgProbes(RoundTrips(db.engine), ServerCpu(PG_ADMIN, make_url(db.url).database or ""))
                for senders in args.senders:
                    result = run_scenario(db, clock, pg, backend, senders, max(1, total // senders),
                                          args.model_ms / 1000)
                    failed |= bool(result.errors)
                    print(row(result), flush=True)
                    results.append(result)
    print(f"total {time.monotonic() - started:.0f} s. latency = route_message start -> the receiver's next "
          "model request built; db% = time inside Database sessions (pool, SQLite writer lock, statements, "
          "commit) / the senders' route time (send) or the receiver's drain+read time (recv); "
          "sql% / commit% / ping% = statement execution / commits / the pool's pre-ping, as parts of all Database "
          "session time (the rest: pool checkout, the SQLite writer lock, ORM and driver work); txn/msg = "
          "commits per routed message (sends share the group commit's transactions).")
    print_goals(results)
    return 1 if failed else 0


def print_goals(results: list[Result]) -> None:
    """Issue 10's goals: SQLite >= 2,000 msg/s at 1, 10 and 100 senders and p99 < 20 ms at 1 sender;
    PostgreSQL >= 1,500 msg/s at 10 senders and p99 < 200 ms at 100 senders."""
    found = {(r.backend, r.senders): r for r in results}
    goals = [(f"sqlite {n} senders >= 2000 msg/s", ("sqlite", n), lambda r: r.rate >= 2000) for n in SENDER_COUNTS]
    goals += [("sqlite 1 sender p99 < 20 ms", ("sqlite", 1), lambda r: _pct(r.latencies_ms, 99) < 20),
              ("postgresql 10 senders >= 1500 msg/s", ("postgresql", 10), lambda r: r.rate >= 1500),
              ("postgresql 100 senders p99 < 200 ms", ("postgresql", 100), lambda r: _pct(r.latencies_ms, 99) < 200)]
    print("goals (issue 10):")
    for name, key, met in goals:
        r = found.get(key)
        print(f"  {'not run' if r is None else 'met    ' if met(r) else 'MISSED '} {name}")


if __name__ == "__main__":
    sys.exit(main())

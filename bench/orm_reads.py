"""Benchmark: what the ORM adds to a hot read (docs/PERFORMANCE.md, issue 26's twelfth pass).

`get_conversation_and_agents` (the routing's read of a conversation with its agents) as it runs, loading ORM
entities, against the same select read as Core rows on the session's connection, and a session that runs no
statement (what any read costs before its statement). Interleaved rounds, so both see the same machine; prints the
median microseconds a call of each and the ORM's share. A first message loads five ORM entities in all
(`test/integration/test_database_metrics.py`'s run), so this bounds what a Core path for the hot reads can save.

Run: `.venv/bin/python bench/orm_reads.py [--calls N] [--agents K] [--database-url URL]` (seconds on SQLite).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

from sqlalchemy import Table, bindparam, select

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from modules.agents.profiles import load_profiles  # noqa: E402
from modules.storage import conversations  # noqa: E402
from modules.storage.db import Database  # noqa: E402
from modules.storage.models import Agent, Conversation  # noqa: E402
from modules.storage.users import get_or_create_user  # noqa: E402
from modules.sub_agent.manager import SubAgentManager  # noqa: E402
from modules.tools.agent_tools import AGENT_TOOLS  # noqa: E402
from modules.tools.run_command import RUN_COMMAND  # noqa: E402

AGENTS, CONVERSATIONS = cast(Table, Agent.__table__), cast(Table, Conversation.__table__)
CORE = select(*CONVERSATIONS.c, *AGENTS.c).join(AGENTS, AGENTS.c.conversation_id == CONVERSATIONS.c.id) \
    .where(CONVERSATIONS.c.id == bindparam("conversation")).order_by(AGENTS.c.created_at, AGENTS.c.id)


def _timed(call: Callable[[], object], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        call()
    return 1e6 * (time.perf_counter() - start) / calls


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=2000, help="calls a round of each")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--agents", type=int, default=1, help="sub-agents besides the master")
    p.add_argument("--database-url", default=None, help="default: a new SQLite file")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(args.database_url or f"sqlite:///{tmp}/orm_reads.db")
        db.migrate()
        conv, master = conversations.create_conversation(db, get_or_create_user(db, "bench").id, "bench")
        sub_agents = SubAgentManager(db, load_profiles(None, {t.name for t in (RUN_COMMAND, *AGENT_TOOLS)}))
        for _ in range(args.agents):
            sub_agents.create_sub_agent(master, "InfoAgent", "bench")

        def orm() -> object:
            return conversations.get_conversation_and_agents(db, conv.id)

        def core() -> object:
            with db.read() as s:
                return s.connection().execute(CORE, {"conversation": conv.id}).all()

        def no_statement() -> object:
            with db.read():
                return None

        series: dict[str, list[float]] = {"orm": [], "core": [], "session, no statement": []}
        for call in (orm, core, no_statement):
            _timed(call, args.calls // 10)  # warm the statement caches
        for _ in range(args.rounds):
            for name, call in zip(series, (orm, core, no_statement), strict=True):
                series[name].append(_timed(call, args.calls))
        db.dispose()
    median = {name: statistics.median(values) for name, values in series.items()}
    for name, value in median.items():
        print(f"{name:>22}: {value:7.0f} µs a call (rounds: {', '.join(f'{v:.0f}' for v in series[name])})")
    print(f"the ORM adds {median['orm'] - median['core']:.0f} µs a read "
          f"({median['orm'] / median['core']:.2f}x the Core read), with {args.agents + 1} agents")
    return 0


if __name__ == "__main__":
    sys.exit(main())

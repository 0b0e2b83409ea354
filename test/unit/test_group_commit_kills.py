"""The group commit (modules/storage/group_commit.py) when a writer is killed: a leader killed mid-batch
hands the others' writes to the next leader instead of failing them, and under eventlet (the server) killed
green writers neither stall nor fail the rest, while the leader's yield lets batches form on SQLite."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from sqlalchemy import func, insert, select

from modules.storage.db import Database
from modules.storage.group_commit import GroupCommit
from modules.storage.models import User
from test.unit.held_batch import HeldBatch

ROOT = Path(__file__).resolve().parents[2]


class Killed(BaseException):
    """What a killed green thread raises where it stood (GreenletExit, an outer eventlet.Timeout)."""


def _user(name: str):
    return lambda s: s.execute(insert(User).values(name=name, created_at=0.0))


def _names(db: Database) -> list[str]:
    with db.read() as s:
        return sorted(s.scalars(select(User.name)))


def test_a_leader_killed_mid_batch_leaves_the_others_writes_to_the_next_leader(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'app.db'}", timeout_s=30)
    db.migrate()
    held = HeldBatch(GroupCommit(db))

    def victim_step(s):
        _user("victim")(s)
        raise Killed

    held.queue({"victim": victim_step, "a": _user("a"), "b": _user("b")})  # the victim leads the next batch
    held.release()
    outcomes = held.join()
    assert isinstance(outcomes["victim"], Killed)
    assert outcomes["a"] == "ok" and outcomes["b"] == "ok", outcomes
    assert _names(db) == ["a", "b"]  # the victim's own write went with its rolled-back batch
    db.dispose()


GREEN_WRITERS = '''
import json, random, sys
import eventlet
eventlet.monkey_patch()
from sqlalchemy import insert
from modules.storage.db import Database
from modules.storage.group_commit import GroupCommit
from modules.storage.models import User

db = Database(sys.argv[1], timeout_s=30)
db.migrate()
writer = GroupCommit(db)
random.seed(7)
done = []

def run(w):
    for i in range(20):
        writer.call(lambda s, n=f"{w}-{i}": s.execute(insert(User).values(name=n, created_at=0.0)))
        done.append(f"{w}-{i}")

threads = [eventlet.spawn(run, w) for w in range(40)]
killed = set(random.sample(range(40), 10))
for w in killed:
    eventlet.spawn_after(random.uniform(0, 0.05), threads[w].kill)
with eventlet.Timeout(60):
    for w, t in enumerate(threads):
        try:
            t.wait()
        except eventlet.greenlet.GreenletExit:
            pass
print(json.dumps({"done": done, "killed": sorted(killed), "batches": writer.batches}))
'''


def test_green_writers_killed_anywhere_stall_and_fail_no_other_and_batches_form(tmp_path):
    url = f"sqlite:///{tmp_path / 'app.db'}"
    out = subprocess.run([sys.executable, "-c", GREEN_WRITERS, url], cwd=ROOT, capture_output=True, text=True,
                         timeout=120, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    survivors = [w for w in range(40) if w not in result["killed"]]
    assert all(f"{w}-19" in result["done"] for w in survivors)  # every survivor wrote all it had
    db = Database(url)
    stored = set(_names(db))
    assert set(result["done"]) <= stored  # a write that returned is durable
    with db.read() as s:
        assert s.scalar(select(func.count()).select_from(User)) == len(stored)
    assert result["batches"] < len(stored) / 5  # batches formed: each holds many writers' rows
    db.dispose()

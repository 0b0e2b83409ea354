"""Two processes on one PostgreSQL: after an outage longer than the heartbeat timeout, neither takes the other
for gone (no process could beat meanwhile) and a turn that outlived the outage ends as it would have."""

from __future__ import annotations

from modules.event_catalogue import ToolStartEvent
from modules.statuses import TaskStatus
from test.db_urls import fresh_database
from test.faults.helpers import MASTER, Ledger, assert_settled, wait_back
from test.faults.proxy import FaultProxy
from test.scripted_llm import text, tool_calls

OUTAGE_S = 11.0  # longer than the 10 s heartbeat timeout


def test_a_long_outage_does_not_make_live_peers_look_gone(make_server, llm, tmp_path, redis_url):
    with fresh_database("postgresql", tmp_path) as url, FaultProxy("127.0.0.1", 5432) as proxy:
        url = url.replace("@127.0.0.1:5432/", f"@127.0.0.1:{proxy.port}/")
        env = {"REDIS_URL": redis_url, "DB_TIMEOUT_S": "2"}  # a Redis database of this test's own
        runner = make_server(database_url=url, env=env)
        make_server(database_url=url, env=env)  # the peer that could wrongly take the runner's turn over
        llm.script(tool_calls(("run_command", {"command": f"sleep {OUTAGE_S + 2:g}"})), match=MASTER)
        llm.script(text("slept through it"), match=MASTER)
        cid = runner.post("/api/conversations", {"title": "peers"}).json()["conversation_id"]
        ledger = Ledger()
        first = ledger.send(runner, "sleep through an outage", cid).json()
        runner.wait_event(first["task_id"], ToolStartEvent.TYPE)
        proxy.refuse()
        proxy.heal_after(OUTAGE_S).join(OUTAGE_S + 5)
        wait_back(runner)
        task = runner.wait_task(first["task_id"], timeout=30)
        assert task["status"] == TaskStatus.SUCCEEDED, (task.get("error"), runner.log_text())
        assert_settled(runner, cid, ledger)

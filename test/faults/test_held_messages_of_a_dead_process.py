"""A process killed while it routes held messages (its routing request in flight, a second message waiting behind
it) and never restarted: the surviving process of the cluster takes them over when its membership sweep forgets
the dead one, and routes and answers them, once each and in send order, with no other send (server/routing_inbox.py,
`take_over`). They used to wait for the conversation's next send."""

from __future__ import annotations

import threading

from modules.statuses import SendStatus, TaskStatus
from test.conftest import wait_until
from test.db_urls import fresh_database
from test.faults.helpers import MASTER
from test.integration.helpers import history, master_tasks
from test.scripted_llm import match_system, text

ROUTER = match_system("You are RoutingAgent")
TAKE_OVER_S = 30  # the sweep runs every 5 s, and a killed process on this host is gone at once


def test_the_survivor_routes_and_answers_the_held_messages_of_a_killed_process(make_server, llm, tmp_path,
                                                                                redis_url):
    with fresh_database("postgresql", tmp_path) as url:
        a = make_server(database_url=url, env={"REDIS_URL": redis_url})
        b = make_server(database_url=url, env={"REDIS_URL": redis_url})
        never = threading.Event()
        llm.script(text('{"query": "plan a trip to Hangzhou", "agent": "MasterAgent"}', wait=never), match=ROUTER)
        first = a.post("/api/tasks", {"message": "plan a trip to Hangzhou"}).json()
        cid = first["conversation_id"]
        wait_until(lambda: any(ROUTER(r.body) for r in llm.requests), what="A's routing request")
        second = a.post("/api/tasks", {"message": "and book a hotel there", "conversation_id": cid}).json()
        assert first["status"] == second["status"] == SendStatus.ROUTING
        try:
            a.kill()  # SIGKILL with both held: the first's routing request open, the second behind it
            llm.script(text("A trip to Hangzhou: day one, West Lake."), match=MASTER)
            llm.script(text("Booked a hotel by the lake."), match=MASTER)
            routed = [b.routed(sent, timeout=TAKE_OVER_S) for sent in (first, second)]
        finally:
            never.set()
        assert b.wait_task(routed[0]["task_id"])["status"] == TaskStatus.SUCCEEDED
        tasks = wait_until(lambda: (t := master_tasks(b, cid)) and all(
            x["status"] in (TaskStatus.SUCCEEDED, TaskStatus.FAILED) for x in t) and t, what="every turn ended")
        assert [t["status"] for t in tasks] == [TaskStatus.SUCCEEDED] * len(tasks)
        said = [(m["role"], (m["content"] or "").split("\n")[0]) for m in history(b, cid)]
        assert [content for role, content in said if role == "user"] == [
            "plan a trip to Hangzhou", "and book a hotel there"]  # each once, in send order
        assert ("assistant", "A trip to Hangzhou: day one, West Lake.") in said

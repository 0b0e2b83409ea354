"""Command logs past COMMAND_LOG_RETENTION_DAYS are deleted when a process starts its first background command
(and then at most hourly): 200,000 of them, which one user's commands can leave in a week, take seconds of
system calls, and the other users' requests are answered meanwhile (README, "Configuration")."""

from __future__ import annotations

import os
import time

from test.conftest import TWO_USERS, wait_until
from test.integration.helpers import slowest_healthz
from test.scripted_llm import text, tool_calls


def test_pruning_200k_old_command_logs_freezes_no_one(make_server, llm):
    server = make_server(env={"AUTH_TOKENS": TWO_USERS})
    server.token = "tok-alice"
    logs = server.data_dir / "command_logs"
    logs.mkdir(exist_ok=True)
    old = time.time() - 30 * 86400
    for i in range(200_000):
        path = logs / f"old-{i:06d}.log"
        path.touch()
        os.utime(path, (old, old))
    llm.script(tool_calls(("run_command", {"command": "echo hi", "run_in_background": True})))
    llm.script(text("started"))
    with slowest_healthz(server) as slowest:
        sent = server.send("run it in the background")
        server.wait_task(sent["task_id"], timeout=60)
        wait_until(lambda: not any(logs.glob("old-*")), timeout=60, what="the old logs pruned")
    assert slowest[0] < 1, f"/healthz took {slowest[0]:.2f} s while old command logs were pruned"

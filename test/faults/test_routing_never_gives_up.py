"""A held message whose routing keeps failing (no database outage: nothing else resumes the inbox) for longer than
the five retries the worker used to give up after is routed and answered once the failure heals, with no other
send (server/routing_inbox.py); the worker's waits stop growing at their cap meanwhile."""

from __future__ import annotations

import re
from pathlib import Path

from modules.event_catalogue import TextEndEvent
from modules.statuses import SendStatus
from test.conftest import wait_until
from test.faults.helpers import MASTER
from test.scripted_llm import text

LAUNCHER = [str(Path(__file__).with_name("routing_fault_launcher.py"))]
AGAIN = re.compile(r"routing the held messages of \S+ failed\b.*?again in ([\d.e-]+) s")  # a failed try
OLD_RETRIES = 5  # the retries after which the worker gave up
RETRY_MAX_S = 0.2


def test_a_held_message_is_routed_and_answered_once_a_long_routing_failure_heals(make_server, llm, tmp_path):
    fault = tmp_path / "routing-fails"
    fault.touch()
    server = make_server(launcher=LAUNCHER, env={"ROUTING_FAULT_FILE": str(fault), "ROUTING_RETRY_S": "0.02",
                                                 "ROUTING_RETRY_MAX_S": str(RETRY_MAX_S)})
    llm.script(text("answered after the failure healed"), match=MASTER)
    sent = server.post("/api/tasks", {"message": "route me when you can"})
    assert sent.status_code == 202, sent.text
    answer = sent.json()

    log = server.data_dir / "server.log"
    tries = OLD_RETRIES + 3

    def waits() -> list[float]:
        return [float(w) for w in AGAIN.findall(log.read_text(errors="replace"))]

    wait_until(lambda: len(waits()) >= tries, 30,
               what=f"{tries} failed tries (the worker used to stop after {OLD_RETRIES + 1})")
    message = server.get(f"/api/messages/{answer['message_id']}").json()
    assert message["status"] == SendStatus.ROUTING, message

    fault.unlink()
    routed = server.routed(answer, timeout=30)
    task = server.wait_task(routed["task_id"], timeout=30)
    assert [e["data"]["content"] for e in task["events"]
            if e["type"] == TextEndEvent.TYPE] == ["answered after the failure healed"]
    assert max(waits()) == RETRY_MAX_S, waits()  # doubled up to the cap, never past it

"""The streamed export (server/api/export.py) when the database goes away while it reads the histories: before
its first chunk is sent the answer is still a status (503 `database_unavailable`, docs/API.md); after, the
transfer ends without its last chunk, so the client sees an incomplete download, never a shorter file."""

from __future__ import annotations

from pathlib import Path

import pytest
import requests

from modules.statuses import TaskStatus
from test.faults.helpers import MASTER
from test.scripted_llm import text

LAUNCHER = [str(Path(__file__).with_name("export_fault_launcher.py"))]


def _answered_conversation(server, llm, turns: int) -> str:
    cid = server.post("/api/conversations", {"title": "export"}).json()["conversation_id"]
    for n in range(turns):
        llm.script(text(f"answer {n}: " + "words " * 400), match=MASTER)
        sent = server.send(f"question {n}", cid)
        assert server.wait_task(sent["task_id"], timeout=30)["status"] == TaskStatus.SUCCEEDED
    return cid


@pytest.mark.parametrize("fmt", ["json", "md"])
def test_a_database_failure_before_the_first_chunk_answers_503(make_server, llm, tmp_path, fmt):
    fault = tmp_path / "export-fails"
    server = make_server(launcher=LAUNCHER, env={"EXPORT_FAULT_FILE": str(fault)})
    cid = _answered_conversation(server, llm, 1)
    fault.write_text("0")  # the first read of the master's history fails

    res = server.get(f"/api/conversations/{cid}/export", params={"format": fmt})

    assert res.status_code == 503, (res.status_code, res.headers, res.text)
    assert res.json()["code"] == "database_unavailable"
    fault.unlink()
    assert server.get(f"/api/conversations/{cid}/export", params={"format": fmt}).status_code == 200


def test_a_database_failure_after_the_first_chunk_leaves_the_download_incomplete(make_server, llm, tmp_path):
    fault = tmp_path / "export-fails"
    server = make_server(launcher=LAUNCHER, env={"EXPORT_FAULT_FILE": str(fault), "EXPORT_BATCH": "2",
                                                 "EXPORT_CHUNK_CHARS": "5000"})
    cid = _answered_conversation(server, llm, 5)
    whole = server.get(f"/api/conversations/{cid}/export", params={"format": "json"}).content
    assert len(whole) > 2 * 5000  # (eventlet sends nothing before 4 KB: the first chunk is sent whole)
    fault.write_text("3")  # three batches of the master's history, then the database is gone

    res = requests.get(f"{server.url}/api/conversations/{cid}/export", params={"format": "json"}, stream=True,
                       timeout=30)
    assert res.status_code == 200
    received = bytearray()
    with pytest.raises(requests.exceptions.ChunkedEncodingError):
        for chunk in res.iter_content(chunk_size=None):
            received += chunk
    assert 0 < len(received) < len(whole) and whole.startswith(bytes(received))


def test_a_failure_past_the_view_before_any_byte_was_sent_shows_no_stack_trace(make_server, llm, tmp_path):
    """A streamed body that fails before the server wrote anything (eventlet sends nothing before 4 KB; chunks of
    1,000 characters here) is answered 500 by the WSGI server itself: without the server's stack trace."""
    fault = tmp_path / "export-fails"
    server = make_server(launcher=LAUNCHER, env={"EXPORT_FAULT_FILE": str(fault), "EXPORT_BATCH": "1",
                                                 "EXPORT_CHUNK_CHARS": "1000"})
    cid = _answered_conversation(server, llm, 1)
    fault.write_text("1")  # the first chunk is read, the second is not

    res = server.get(f"/api/conversations/{cid}/export", params={"format": "json"})

    assert res.status_code == 500
    assert "Traceback" not in res.text and "injected" not in res.text and "modules/" not in res.text, res.text

"""Under load a message's later text chunks wait longer (STREAM_EVENTS_PER_S), through the real server: the reply's
text is whole and in order, in fewer events, and its first chunk goes out alone, as without load; `/metrics` shows
the wait."""

from __future__ import annotations

from modules.event_catalogue import TextChunkEvent
from modules.statuses import TaskStatus
from test.conftest import wait_until
from test.scripted_llm import text


def test_a_small_event_budget_joins_a_replys_later_chunks_and_keeps_its_first(make_server, llm):
    server = make_server(env={"STREAM_EVENTS_PER_S": "2"})  # one message streaming: its later chunks wait 0.5 s
    content = "".join(f"w{n:02d} " for n in range(20))
    llm.script(text(content, chunk_size=4, delay_s=0.1))  # 20 pieces, 0.1 s apart

    sent = server.send("hello")
    # While it streams, the gauge shows the wait of its later chunks; once it ended, the configured window.
    wait_until(lambda: "chat_stream_chunk_wait_seconds 0.5" in server.get("/metrics").text, what="the wider wait")
    task = server.wait_task(sent["task_id"])
    wait_until(lambda: "chat_stream_chunk_wait_seconds 0.04" in server.get("/metrics").text, what="the window")

    assert task["status"] == TaskStatus.SUCCEEDED, task
    chunks = [e["data"]["content"] for e in task["events"] if e["type"] == TextChunkEvent.TYPE]
    assert "".join(chunks) == content
    assert chunks[0] == content[:4]
    assert len(chunks) <= 8, chunks  # 2 s of pieces in windows of 0.5 s; 20 events at the default budget

"""Conversations longer than the model's context window stay usable (README, "Long conversations"): the real
server against a scripted model that refuses, as providers do, every request longer than its window."""

from __future__ import annotations

import pytest

from modules.event_catalogue import ContextCompactedEvent, TextEndEvent, wire_model
from modules.statuses import TaskStatus
from test.scripted_llm import text
from test.scripted_steps import text_of
from test.windowed_model import OVERFLOW_ANSWERS, WindowedModel

WINDOW = 4000  # tokens: the master's system prompt and tools take about 1,300 of them


def words(n: int, seed: str) -> str:
    return " ".join(f"{seed}{i % 97}" for i in range(n))


def last_user(body: dict) -> str:
    return next(text_of(m) for m in reversed(body["messages"]) if m["role"] == "user")


def events_of(task: dict, kind: str) -> list[dict]:
    return [e["data"] for e in task["events"] if e["type"] == kind]


def test_a_conversation_that_outgrows_the_window_goes_on_with_its_older_part_summarised(make_server, llm):
    model = WindowedModel(WINDOW, lambda body: text(f"noted: {last_user(body)[:30]}", chunk_size=50)).serve(llm)
    server = make_server(env={"MODEL_CONTEXT_TOKENS": str(WINDOW)})
    cid = None
    compacted: list[dict] = []
    for turn in range(1, 31):
        sent = server.send(f"turn {turn}: " + words(80, f"t{turn}w"), cid)
        cid = sent["conversation_id"]
        task = server.wait_task(sent["task_id"])
        assert task["status"] == TaskStatus.SUCCEEDED, (turn, task["events"][-1])
        compacted += events_of(task, ContextCompactedEvent.TYPE)
    assert model.refused == []  # the budget saw every overflow coming
    assert compacted and model.summaries == len(compacted)  # one summary request each
    assert all(c["tokens_after"] < c["tokens_before"] and c["summary"] for c in compacted)
    for event in compacted:
        wire_model(ContextCompactedEvent).model_validate(event)  # as the catalogue says
    assert max(model.sizes) <= WINDOW * 3 // 4  # the window less the reply's reserve
    stored = server.get(f"/api/conversations/{cid}/messages").json()["data"]
    assert [m["content"].split(":")[0] for m in stored if m["role"] == "user"] == [f"turn {n}" for n in range(1, 31)]
    summaries = server.get(f"/api/conversations/{cid}/summaries").json()["data"]
    assert [s["summary_id"] for s in summaries] == [c["summary_id"] for c in compacted]
    export = server.get(f"/api/conversations/{cid}/export?format=md").text
    assert all(f"turn {n}:" in export for n in range(1, 31))  # the stored history stays whole
    usage = server.get(f"/api/conversations/{cid}/usage").json()  # the summaries are metered as compaction
    assert usage["by_purpose"]["compaction"]["requests"] == len(compacted)


@pytest.mark.parametrize("wording", sorted(OVERFLOW_ANSWERS))
def test_an_overflow_the_budget_missed_compacts_harder_and_is_asked_once_more(make_server, llm, wording):
    """The server thinks the window is 32,768 tokens (a model of no known name); the provider's is 3,000.
    The first refusal costs one more request; from then on the server keeps below what was refused."""
    model = WindowedModel(3000, lambda body: text("ok"), overflow=wording).serve(llm)
    server = make_server()
    cid = None
    retried = []
    for turn in range(1, 12):
        before = len(model.refused)
        sent = server.send(f"turn {turn}: " + words(300, f"t{turn}w"), cid)
        cid = sent["conversation_id"]
        task = server.wait_task(sent["task_id"])
        assert task["status"] == TaskStatus.SUCCEEDED, (turn, task["events"][-1])
        if len(model.refused) > before:
            assert events_of(task, ContextCompactedEvent.TYPE) and len(events_of(task, TextEndEvent.TYPE)) == 1
            retried.append(turn)
    assert len(retried) == 1 and len(model.refused) == 1, (retried, model.refused)


def test_a_message_larger_than_the_window_fails_clearly_and_the_conversation_goes_on(make_server, llm):
    model = WindowedModel(WINDOW, lambda body: text(f"about: {last_user(body)[:20]}")).serve(llm)
    server = make_server(env={"MODEL_CONTEXT_TOKENS": str(WINDOW)})
    sent = server.send("hello")
    cid = sent["conversation_id"]
    assert server.wait_task(sent["task_id"])["status"] == TaskStatus.SUCCEEDED
    big = server.send("huge: " + words(2700, "x"), cid)
    task = server.wait_task(big["task_id"])
    assert task["status"] == TaskStatus.FAILED
    [failure] = events_of(task, "error")
    assert failure["code"] == "context_too_large" and "4000 tokens" in failure["message"]
    assert model.refused == [] and len(model.sizes) == 1  # never sent
    after = server.send("and a short one", cid)
    assert server.wait_task(after["task_id"])["status"] == TaskStatus.SUCCEEDED
    body = llm.agent_requests[-1].body
    assert last_user(body) == "and a short one"
    huge = next(text_of(m) for m in body["messages"] if text_of(m).startswith("huge: "))
    assert "characters omitted" in huge and huge.endswith(" x79 x80")  # head and tail kept

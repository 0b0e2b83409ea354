"""The event log's group commit and its coalescing of text chunks, on a real SQLite database with real threads:
an event reaches the transport only once it is durable, in log order per task, and a streamed message's
chunks within STREAM_FLUSH_MS become one event with the same text."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy.exc import IntegrityError

from modules.event_catalogue import (
    AgentStateEvent,
    AiMessageStartEvent,
    ReasoningChunkEvent,
    SuggestionsEvent,
    TaskCompleteEvent,
    TaskEndEvent,
    TextChunkEvent,
    TextEndEvent,
    ToolStartEvent,
)
from modules.storage import tasks as task_store
from modules.storage.db import Database
from modules.storage.models import TaskEvent
from server.sender import TaskEventSender
from server.turns.event_log import EventLog
from test.unit.teams import conversation_with_sub_agent

TASKS = 8
EVENTS = 25
WAIT_S = 10


@pytest.fixture
def team(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'app.db'}")
    conv, master, _sub, _ = conversation_with_sub_agent(db)
    yield db, conv, master
    db.dispose()


def _tasks(db, conv, agent, n):
    with db.write() as s:
        return [task_store.create_task_in(s, conversation_id=conv.id, agent_id=agent.id, task_type="chat").id
                for _ in range(n)]


class Recorder:
    """A transport that checks, for every event it is handed, that the event is in the durable log already."""

    def __init__(self, db: Database):
        self._db = db
        self.sent: list[tuple[str, dict]] = []
        self.not_durable: list[tuple[str, int]] = []
        self.arrived = threading.Condition()

    def emit(self, event_type, data, room):
        logged = {e.idx: e for e in task_store.list_events(self._db, data["task_id"], data["idx"], limit=1)}
        if data["idx"] not in logged or logged[data["idx"]].type != event_type:
            self.not_durable.append((data["task_id"], data["idx"]))
        with self.arrived:
            self.sent.append((event_type, data))
            self.arrived.notify_all()

    def of(self, task_id):
        return [(t, d) for t, d in self.sent if d["task_id"] == task_id]

    def wait_for(self, count, task_id):
        with self.arrived:
            assert self.arrived.wait_for(lambda: len(self.of(task_id)) >= count, WAIT_S), self.of(task_id)


def _sender(log, transport, task_id, conv, agent):
    return TaskEventSender(log, transport, task_id=task_id, conversation_id=conv.id, agent_id=agent.id)


def test_concurrent_tasks_share_transactions_and_each_delivers_durable_events_in_log_order(team):
    db, conv, master = team
    log, transport = EventLog(db), Recorder(db)
    task_ids = _tasks(db, conv, master, TASKS)
    start = threading.Barrier(TASKS)

    def stream(task_id):
        sender = _sender(log, transport, task_id, conv, master)
        start.wait(WAIT_S)
        for i in range(EVENTS):
            sender.emit(ToolStartEvent(tool_call_id=str(i), name="t", arguments="{}"))

    threads = [threading.Thread(target=stream, args=(t,)) for t in task_ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_S * 3)
    assert transport.not_durable == []
    for task_id in task_ids:
        got = transport.of(task_id)
        assert [d["idx"] for _, d in got] == list(range(EVENTS))
        assert [d["tool_call_id"] for _, d in got] == [str(i) for i in range(EVENTS)]
        assert [e.idx for e in task_store.list_events(db, task_id)] == list(range(EVENTS))
    assert log.writer.rows == TASKS * EVENTS
    assert log.writer.batches < TASKS * EVENTS  # writers of different tasks shared transactions


def test_a_failed_writer_fails_alone_and_its_task_continues_from_the_durable_log(team):
    db, conv, master = team
    log = EventLog(db)
    good, bad = _tasks(db, conv, master, 2)
    task_store.insert_events(db, bad, 0, [(ToolStartEvent.TYPE, {})])  # index 0 taken behind the cache's back
    row = dict(type=ToolStartEvent.TYPE, data={}, ts=0.0)
    errors = log.writer.insert_each(TaskEvent.__table__, [[dict(task_id=good, idx=0, **row)],
                                                          [dict(task_id=bad, idx=0, **row)]])
    assert errors[0] is None and isinstance(errors[1], IntegrityError)
    assert [e.idx for e in task_store.list_events(db, good)] == [0]

    log._next[bad] = 0  # the cache believes index 0 is free
    with pytest.raises(IntegrityError):
        log.append(bad, ToolStartEvent.TYPE, {})
    assert log.append(bad, "tool_end", {}) == 1  # the index was read from the log again
    assert [e.type for e in task_store.list_events(db, bad)] == [ToolStartEvent.TYPE, "tool_end"]


def test_chunks_of_one_message_become_one_event_and_other_events_keep_their_place(team):
    db, conv, master = team
    log, transport = EventLog(db, flush_s=30.0), Recorder(db)  # only other events end the window here
    (task_id,) = _tasks(db, conv, master, 1)
    sender = _sender(log, transport, task_id, conv, master)
    sender.emit(AiMessageStartEvent(message_id="m1", display_name="Master"))
    for piece in ("Hel", "lo, ", "wor"):
        sender.emit(TextChunkEvent(message_id="m1", content=piece))
    sender.emit(ToolStartEvent(tool_call_id="c1", name="t", arguments="{}"))
    for piece in ("ld", "!"):
        sender.emit(TextChunkEvent(message_id="m1", content=piece))
    sender.emit(TextChunkEvent(message_id="m2", content="next"))  # another message: not merged
    sender.emit(TextEndEvent(message_id="m2", content="next"))

    expected = [(AiMessageStartEvent.TYPE, None), (TextChunkEvent.TYPE, "Hello, wor"), (ToolStartEvent.TYPE, None),
                (TextChunkEvent.TYPE, "ld!"), (TextChunkEvent.TYPE, "next"), (TextEndEvent.TYPE, "next")]
    logged = task_store.list_events(db, task_id)
    assert [(e.type, e.data.get("content")) for e in logged] == expected
    assert [e.idx for e in logged] == list(range(len(expected)))
    assert [(t, d.get("content")) for t, d in transport.of(task_id)] == expected
    assert [d["idx"] for _, d in transport.of(task_id)] == list(range(len(expected)))
    assert transport.not_durable == []


def test_thinking_chunks_are_coalesced_apart_from_the_text_chunks_of_the_same_message(team):
    db, conv, master = team
    log, transport = EventLog(db, flush_s=30.0), Recorder(db)
    (task_id,) = _tasks(db, conv, master, 1)
    sender = _sender(log, transport, task_id, conv, master)
    for piece in ("I th", "ink", " so."):
        sender.emit(ReasoningChunkEvent(message_id="m1", content=piece))
    for piece in ("Ye", "s."):
        sender.emit(TextChunkEvent(message_id="m1", content=piece))
    sender.emit(TextEndEvent(message_id="m1", content="Yes."))

    expected = [(ReasoningChunkEvent.TYPE, "I think so."), (TextChunkEvent.TYPE, "Yes."), (TextEndEvent.TYPE, "Yes.")]
    assert [(e.type, e.data.get("content")) for e in task_store.list_events(db, task_id)] == expected
    assert [(t, d.get("content")) for t, d in transport.of(task_id)] == expected


def test_a_chunk_goes_out_when_its_window_ends_without_another_event(team):
    db, conv, master = team
    log, transport = EventLog(db, flush_s=0.05), Recorder(db)
    (task_id,) = _tasks(db, conv, master, 1)
    sender = _sender(log, transport, task_id, conv, master)
    sender.emit(TextChunkEvent(message_id="m1", content="a"))
    sender.emit(TextChunkEvent(message_id="m1", content="b"))
    transport.wait_for(1, task_id)
    assert [(t, d["content"], d["idx"]) for t, d in transport.of(task_id)] == [(TextChunkEvent.TYPE, "ab", 0)]
    assert transport.not_durable == []


def test_a_tasks_end_written_in_its_own_transaction_comes_after_a_waiting_chunk(team):
    db, conv, master = team
    log, transport = EventLog(db, flush_s=30.0), Recorder(db)
    (task_id,) = _tasks(db, conv, master, 1)
    sender = _sender(log, transport, task_id, conv, master)
    sender.emit(TextChunkEvent(message_id="m1", content="partial"))
    with log.exclusive(task_id), db.write() as s:  # as the end of a turn writes it (turn_end)
        end = TaskEndEvent(has_running_sub_agents=False, has_running_background_commands=False)
        first = log.append_in(s, task_id, sender.payloads([end]))
    assert first == 1
    assert [(e.idx, e.type) for e in task_store.list_events(db, task_id)] == [(0, TextChunkEvent.TYPE), (1,
                                                                                                         TaskEndEvent.TYPE)]
    assert [(t, d["content"]) for t, d in transport.of(task_id)] == [(TextChunkEvent.TYPE, "partial")]


def test_without_a_window_every_chunk_is_its_own_event(team):
    db, conv, master = team
    log, transport = EventLog(db, flush_s=0), Recorder(db)
    (task_id,) = _tasks(db, conv, master, 1)
    sender = _sender(log, transport, task_id, conv, master)
    for piece in ("a", "b"):
        sender.emit(TextChunkEvent(message_id="m1", content=piece))
    assert [(e.type, e.data["content"]) for e in task_store.list_events(db, task_id)] == [
        (TextChunkEvent.TYPE, "a"), (TextChunkEvent.TYPE, "b")]


def test_an_event_after_the_tasks_end_follows_the_ends_events_in_the_log(team):
    """The end's events are written inside its transaction (`append_in`); an event that follows before the
    task is forgotten (suggestions, whose model may answer at once) takes the next index, not one of theirs."""
    db, conv, master = team
    log = EventLog(db)
    [task_id] = _tasks(db, conv, master, 1)
    assert log.append(task_id, TextEndEvent.TYPE, {"content": "done"}) == 0
    with log.exclusive(task_id), db.write() as s:
        assert log.append_in(s, task_id, [(AgentStateEvent.TYPE, {}), (TaskCompleteEvent.TYPE, {})]) == 1
    assert log.append(task_id, SuggestionsEvent.TYPE, {"questions": ["more?"]}) == 3
    assert [e.type for e in task_store.list_events(db, task_id, 0, 10)] == [
        TextEndEvent.TYPE, AgentStateEvent.TYPE, TaskCompleteEvent.TYPE, SuggestionsEvent.TYPE]


def test_a_chunk_after_the_window_waits_behind_the_waiting_one_and_the_reader_writes_neither(team):
    """Under load the flusher came late and the model's reader wrote the chunk waiting before its own (a
    group-commit wait per chunk); now it queues behind it and the flusher, or the task's next other event, writes
    both, in order."""
    db, conv, master = team
    log, transport = EventLog(db, flush_s=0.02), Recorder(db)
    log._ensure_flusher = lambda: None  # the flusher is late: nothing writes the chunks but the task itself
    (task_id,) = _tasks(db, conv, master, 1)
    sender = _sender(log, transport, task_id, conv, master)
    sender.emit(TextChunkEvent(message_id="m1", content="a"))
    time.sleep(0.05)  # past the window of "a"
    sender.emit(TextChunkEvent(message_id="m1", content="b"))
    sender.emit(TextChunkEvent(message_id="m2", content="c"))  # another message, within the window of "b"

    assert task_store.list_events(db, task_id) == [] and transport.of(task_id) == []
    sender.emit(TextEndEvent(message_id="m2", content="c"))

    expected = [(0, "a"), (1, "b"), (2, "c"), (3, "c")]
    assert [(e.idx, e.data["content"]) for e in task_store.list_events(db, task_id)] == expected
    assert [(d["idx"], d["content"]) for _, d in transport.of(task_id)] == expected
    assert transport.not_durable == []


def test_the_flusher_writes_a_tasks_waiting_chunks_in_order(team):
    db, conv, master = team
    log, transport = EventLog(db, flush_s=0.3), Recorder(db)
    (task_id,) = _tasks(db, conv, master, 1)
    sender = _sender(log, transport, task_id, conv, master)
    sender.emit(TextChunkEvent(message_id="m1", content="a"))
    sender.emit(TextChunkEvent(message_id="m2", content="b"))  # waits behind "a", its window 0.3 s from now

    transport.wait_for(2, task_id)

    assert [(d["idx"], d["content"]) for _, d in transport.of(task_id)] == [(0, "a"), (1, "b")]
    assert transport.not_durable == []


def test_under_load_later_chunks_wait_longer_and_a_new_messages_first_chunk_goes_out_at_once(team):
    """STREAM_EVENTS_PER_S: with five messages streaming and a budget of five chunk events a second, a message's
    later chunks wait a second (pieces 0.1 s apart become one event); a new message's first chunk keeps the short
    window, and wakes the flusher, asleep until the later chunks are due (issue 26)."""
    db, conv, master = team
    log, transport = EventLog(db, flush_s=0.02, events_per_s=5), Recorder(db)
    tasks = _tasks(db, conv, master, 6)
    senders = {task_id: _sender(log, transport, task_id, conv, master) for task_id in tasks}
    streaming, newcomer = tasks[:5], tasks[5]
    for task_id in streaming:
        senders[task_id].emit(TextChunkEvent(message_id="m", content="a"))
    for task_id in streaming:  # each message's first chunk went out alone, within the short window
        transport.wait_for(1, task_id)
    for task_id in streaming:
        senders[task_id].emit(TextChunkEvent(message_id="m", content="b"))
    time.sleep(0.1)  # the next pieces come long after the short window
    for task_id in streaming:
        senders[task_id].emit(TextChunkEvent(message_id="m", content="c"))

    senders[newcomer].emit(TextChunkEvent(message_id="n", content="x"))
    transport.wait_for(1, newcomer)
    assert [len(transport.of(task_id)) for task_id in streaming] == [1] * 5  # theirs still wait

    for task_id in streaming:
        transport.wait_for(2, task_id)
        assert [d["content"] for _, d in transport.of(task_id)] == ["a", "bc"]
    assert transport.not_durable == []

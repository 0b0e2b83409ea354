"""The chunk window under load (server/turns/stream_window.py): a message's later chunks wait longer as more
messages stream, so the process sends about STREAM_EVENTS_PER_S chunk events a second; its first chunk does not."""

from __future__ import annotations

import pytest

from modules.event_catalogue import ReasoningChunkEvent, TextChunkEvent
from server.turns.stream_window import MAX_WAIT_S, STREAMING_S, StreamWindow

FLUSH_S = 0.04
TEXT, THINKING = TextChunkEvent.TYPE, ReasoningChunkEvent.TYPE


def _streaming(window: StreamWindow, tasks: int, moment: float) -> None:
    for n in range(tasks):
        window.wait(f"t{n}", ("m", TEXT), moment)


def test_a_later_chunk_waits_for_the_streams_share_of_the_budget_and_a_first_chunk_does_not():
    window = StreamWindow(FLUSH_S, events_per_s=100)
    _streaming(window, 20, 10.0)  # every task's first chunk
    assert window.wait("t0", ("m", TEXT), 10.1) == pytest.approx(20 / 100)
    assert window.wait("t1", ("m", THINKING), 10.1) == FLUSH_S  # the message's thinking starts
    assert window.wait("t2", ("m2", TEXT), 10.1) == FLUSH_S  # a new message of the task
    assert window.wait("new", ("m", TEXT), 10.1) == FLUSH_S


def test_few_streams_keep_the_configured_window_and_many_wait_at_most_a_second():
    few = StreamWindow(FLUSH_S, events_per_s=1000)
    _streaming(few, 10, 1.0)
    assert few.wait("t0", ("m", TEXT), 1.1) == FLUSH_S  # 10 / 1000 s is less than the window
    many = StreamWindow(FLUSH_S, events_per_s=10)
    _streaming(many, 50, 1.0)
    assert many.wait("t0", ("m", TEXT), 1.1) == MAX_WAIT_S


def test_without_a_budget_the_window_never_widens():
    window = StreamWindow(FLUSH_S, events_per_s=0)
    _streaming(window, 500, 1.0)
    assert window.wait("t0", ("m", TEXT), 1.1) == FLUSH_S


def test_tasks_that_stopped_streaming_or_ended_count_no_longer():
    window = StreamWindow(FLUSH_S, events_per_s=10)
    _streaming(window, 8, 1.0)
    assert window.wait("t0", ("m", TEXT), 1.1) == pytest.approx(0.8)
    window.forget("t1")
    assert window.wait("t0", ("m", TEXT), 1.2) == pytest.approx(0.7)
    later = 1.0 + STREAMING_S * 2  # the other tasks sent nothing since
    assert window.wait("t0", ("m", TEXT), later) == pytest.approx(max(FLUSH_S, 1 / 10))


def test_the_wait_of_later_chunks_now_is_what_the_metrics_show():
    window = StreamWindow(FLUSH_S, events_per_s=10)
    assert window.later(1.0) == FLUSH_S
    _streaming(window, 5, 1.0)
    assert window.later(1.1) == pytest.approx(0.5)
    assert window.later(1.0 + STREAMING_S * 2) == FLUSH_S  # nobody sent anything since

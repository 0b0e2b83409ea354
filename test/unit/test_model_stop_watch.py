"""A model request's caller sleeps until its request ends or is stopped, with no timer of its own; one stop
watch looks at every waiting request's switch (modules/llm/stop_watch.py, issue 26: a 0.1 s poll per request
was 5,000 wake-ups a second for 500 streams, about 14 % of a core)."""

from __future__ import annotations

import threading
import time

import pytest

from modules.llm import openai_model
from modules.llm.stop_watch import StopWatch
from test.scripted_llm import hang, text
from test.unit.scripted_client import USER, make_model

pytestmark = pytest.mark.timeout(30)


def test_a_watched_switch_wakes_its_waiter_and_an_unwatched_one_does_not():
    watch = StopWatch(poll_s=0.01)
    stop, other = threading.Event(), threading.Event()
    woken, quiet = threading.Event(), threading.Event()
    watch.watch(stop.is_set, woken)
    watch.unwatch(watch.watch(other.is_set, quiet))

    stop.set()
    other.set()

    assert woken.wait(5)
    time.sleep(0.05)  # several polls: the unwatched switch is not looked at
    assert not quiet.is_set()


def test_the_watch_ends_with_the_last_request_and_starts_again_with_the_next():
    watch = StopWatch(poll_s=0.01)
    token = watch.watch(lambda: False, threading.Event())
    watch.unwatch(token)
    deadline = time.monotonic() + 5
    while watch._running and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not watch._running

    woken = threading.Event()
    watch.watch(lambda: True, woken)
    assert woken.wait(5)


class _RecordingEvent(threading.Event):
    timeouts: list[float | None] = []

    def wait(self, timeout=None):
        _RecordingEvent.timeouts.append(timeout)
        return super().wait(timeout)


def test_a_caller_waits_without_a_timer_and_a_stop_during_a_silent_endpoint_ends_it_at_once(llm, monkeypatch):
    monkeypatch.setattr(threading, "Event", _RecordingEvent)  # every Event made meanwhile (the caller's among them)
    _RecordingEvent.timeouts = []
    llm.script(hang(60), text("next"))
    model = make_model(llm)
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()

    started = time.monotonic()
    reply = model.stream_chat(messages=USER, should_stop=stop.is_set)

    assert reply.finish_reason == "stopped" and time.monotonic() - started < 3
    assert None in _RecordingEvent.timeouts and openai_model._STOP_POLL_S not in _RecordingEvent.timeouts  # no poll
    assert model.stream_chat(messages=USER).content == "next"


def test_a_request_watched_while_the_watch_thread_starts_keeps_its_own_token(monkeypatch):
    # Under eventlet, starting the watch thread yields: another request may be watched meanwhile. Each must get
    # its own token, or the first one's unwatch drops the second's switch and a stop never wakes it (a stopped
    # sub-agent's request waited forever beside its master's).
    watch = StopWatch(poll_s=0.01)
    second_switch, second_woken = threading.Event(), threading.Event()
    tokens: list[int] = []
    real_thread = threading.Thread

    class YieldingThread(real_thread):  # type: ignore[misc,valid-type]
        def start(self) -> None:
            if not tokens:  # the yield inside the first start: the second request arrives
                tokens.append(watch.watch(second_switch.is_set, second_woken))
            super().start()

    monkeypatch.setattr(threading, "Thread", YieldingThread)
    first = watch.watch(lambda: False, threading.Event())
    assert first != tokens[0]
    watch.unwatch(first)  # the first request ends
    second_switch.set()  # the second is stopped
    assert second_woken.wait(5)

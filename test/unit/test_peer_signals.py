"""Peer signals over the real Redis: a peer hears them, the sender does not, junk is ignored."""

from __future__ import annotations

import queue
import threading

import pytest
import redis

from modules.peer_signals import CHANNEL, QUEUED, STOP, PeerSignals, RedisPeerSignals, build_peer_signals

REDIS = "redis://127.0.0.1:6379/0"


def _spawn(fn, *args):
    threading.Thread(target=fn, args=args, daemon=True).start()


def _listening(signals: RedisPeerSignals, heard: queue.Queue) -> RedisPeerSignals:
    for kind in (QUEUED, STOP):
        signals.subscribe(kind, lambda key, kind=kind: heard.put((kind, key)))
    signals.start(_spawn)
    return signals


def _wait_subscribed(count: int) -> None:
    client = redis.Redis.from_url(REDIS)
    for _ in range(200):
        if client.pubsub_numsub(CHANNEL)[0][1] >= count:
            return
        threading.Event().wait(0.02)
    pytest.fail("listeners did not subscribe")


def test_a_peer_hears_a_signal_and_its_sender_does_not():
    base = redis.Redis.from_url(REDIS).pubsub_numsub(CHANNEL)[0][1]
    heard_a, heard_b = queue.Queue(), queue.Queue()
    a = _listening(RedisPeerSignals(REDIS, "proc-a"), heard_a)
    _listening(RedisPeerSignals(REDIS, "proc-b"), heard_b)
    _wait_subscribed(base + 2)

    redis.Redis.from_url(REDIS).publish(CHANNEL, b"not json")  # ignored, the listener goes on
    a.publish(QUEUED, "agent-1")
    a.publish(STOP, "task-1")
    assert heard_b.get(timeout=5) == (QUEUED, "agent-1")
    assert heard_b.get(timeout=5) == (STOP, "task-1")
    assert heard_a.empty()


def test_without_redis_nothing_is_sent_and_unknown_kinds_are_refused():
    signals = build_peer_signals(None, "proc")
    assert type(signals) is PeerSignals
    signals.publish(QUEUED, "agent-1")
    with pytest.raises(ValueError):
        signals.publish("shout", "x")

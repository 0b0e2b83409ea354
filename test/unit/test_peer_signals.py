"""Peer signals over the real Redis: a peer hears them, the sender does not, junk is ignored; each test on a
channel of its own, so other tests' (and other suites') listeners neither count nor talk here."""

from __future__ import annotations

import json
import queue
import threading
import uuid

import pytest
import redis

from modules.peer_signals import (
    CHANNEL,
    QUEUED,
    STOP,
    PeerSignals,
    RedisPeerSignals,
    build_peer_signals,
    scoped_channel,
)


def _spawn(fn, *args):
    threading.Thread(target=fn, args=args, daemon=True).start()


def _listening(signals: RedisPeerSignals, heard: queue.Queue) -> RedisPeerSignals:
    for kind in (QUEUED, STOP):
        signals.subscribe(kind, lambda key, kind=kind: heard.put((kind, key)))
    signals.start(_spawn)
    return signals


def _wait_subscribed(url: str, channel: str, count: int) -> None:
    client = redis.Redis.from_url(url)
    for _ in range(500):
        if client.pubsub_numsub(channel)[0][1] == count:
            return
        threading.Event().wait(0.02)
    pytest.fail(f"{count} listeners did not subscribe to {channel}")


def test_a_peer_hears_a_signal_and_its_sender_does_not(redis_url):
    channel = f"test-peer-signals:{uuid.uuid4().hex}"
    heard_a, heard_b = queue.Queue(), queue.Queue()
    a = _listening(RedisPeerSignals(redis_url, "proc-a", channel=channel), heard_a)
    _listening(RedisPeerSignals(redis_url, "proc-b", channel=channel), heard_b)
    _wait_subscribed(redis_url, channel, 2)

    redis.Redis.from_url(redis_url).publish(channel, b"not json")  # ignored, the listener goes on
    a.publish(QUEUED, "agent-1")
    a.publish(STOP, "task-1")
    assert heard_b.get(timeout=5) == (QUEUED, "agent-1")
    assert heard_b.get(timeout=5) == (STOP, "task-1")
    # A's listener reads the channel in order: once it hears a third process's marker, sent after A's own two
    # signals, it has had those and dropped them.
    RedisPeerSignals(redis_url, "proc-c", channel=channel).publish(QUEUED, "marker")
    assert heard_a.get(timeout=5) == (QUEUED, "marker")
    assert heard_a.empty()


def test_the_channel_is_scoped_by_the_redis_database():
    assert scoped_channel(CHANNEL, "redis://127.0.0.1:6379/0") == CHANNEL
    assert scoped_channel(CHANNEL, "redis://127.0.0.1:6379") == CHANNEL
    assert scoped_channel(CHANNEL, "redis://127.0.0.1:6379/7") == f"{CHANNEL}:db7"
    assert RedisPeerSignals("redis://127.0.0.1:6379/7", "p").channel == f"{CHANNEL}:db7"


def test_without_redis_nothing_is_sent_and_unknown_kinds_are_refused(redis_url):
    signals = build_peer_signals(None, "proc-alone")
    assert type(signals) is PeerSignals
    heard = []
    signals.subscribe(QUEUED, heard.append)
    listener = redis.Redis.from_url(redis_url).pubsub(ignore_subscribe_messages=True)
    listener.subscribe(CHANNEL, scoped_channel(CHANNEL, redis_url))
    try:
        signals.publish(QUEUED, "agent-1")
        # A marker sent after it: whatever the publish had sent would arrive first.
        marker = json.dumps({"from": "marker-" + uuid.uuid4().hex, "kind": QUEUED, "key": "marker"})
        redis.Redis.from_url(redis_url).publish(scoped_channel(CHANNEL, redis_url), marker)
        seen = []
        for _ in range(250):
            message = listener.get_message(timeout=0.02)
            if message is not None:
                seen.append(message["data"].decode())
                if seen[-1] == marker:
                    break
        assert marker in seen, "the marker never arrived"
        assert not any('"proc-alone"' in data for data in seen), seen
    finally:
        listener.close()
    assert heard == []  # no echo to its own handlers either
    with pytest.raises(ValueError):
        signals.publish("shout", "x")

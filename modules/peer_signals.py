"""Nudges between the server processes that share one database, over Redis pub/sub.

The database stays the only source of truth: a signal only tells the other
processes to look at it now rather than at their next poll (a blocked ask
rescans its queue, an owner re-reads its stop and cancel requests). A lost signal costs
latency, never a message. Without Redis there are no peers to nudge, and
`PeerSignals` does nothing.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

CHANNEL = "chat-server:peer-signals"
QUEUED = "queued"  # key: an agent id; a message waits in its queue (an answer to its blocked ask, maybe)
STOP = "stop"  # key: a task id; a stop was requested for it
CANCEL_COMMAND = "cancel_command"  # key: a background command id; a cancel was requested for it
KINDS = (QUEUED, STOP, CANCEL_COMMAND)

Handler = Callable[[str], None]


def scoped_channel(base: str, redis_url: str) -> str:
    """Redis pub/sub ignores database numbers; a channel named after the URL's database keeps the servers of
    one database (one deployment, or one test) from hearing another's. Database 0 keeps the plain name."""
    from redis.connection import parse_url  # imported here: a single process runs without redis

    db = int(parse_url(redis_url).get("db") or 0)  # type: ignore[no-untyped-call]  # redis leaves it unannotated
    return base if db == 0 else f"{base}:db{db}"


class PeerSignals:
    """One process alone: nothing to tell, nothing to hear."""

    def __init__(self) -> None:
        self._handlers: dict[str, list[Handler]] = {kind: [] for kind in KINDS}

    def subscribe(self, kind: str, handler: Handler) -> None:
        self._handlers[kind].append(handler)

    def publish(self, kind: str, key: str) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown peer signal {kind!r}")

    def start(self, spawn: Callable[..., Any]) -> None:
        """Begin listening (a background task started with `spawn`)."""

    def _dispatch(self, kind: str, key: str) -> None:
        for handler in self._handlers.get(kind, ()):
            try:
                handler(key)
            except Exception:
                log.exception("peer signal %s %s: handler failed", kind, key)


class RedisPeerSignals(PeerSignals):
    """Signals through one Redis channel; a process ignores its own."""

    def __init__(self, url: str, process_id: str, *, retry_s: float = 1.0, timeout_s: float = 2.0,
                 channel: str | None = None) -> None:
        import redis  # imported here: a single process runs without it

        super().__init__()
        self.channel = channel or scoped_channel(CHANNEL, url)
        # Publishing happens inside sends and stops: a Redis that does not answer costs at most timeout_s.
        self._redis = redis.Redis.from_url(url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s)
        # The listener waits for messages without a read timeout; pings find a dead connection.
        self._listener = redis.Redis.from_url(url, socket_connect_timeout=timeout_s, socket_keepalive=True,
                                              health_check_interval=30)
        self._process_id = process_id
        self._retry_s = retry_s

    def publish(self, kind: str, key: str) -> None:
        super().publish(kind, key)
        try:
            self._redis.publish(self.channel, json.dumps({"from": self._process_id, "kind": kind, "key": key}))
        except Exception as exc:  # the peers' poll picks it up instead
            log.warning("could not publish peer signal %s %s: %s", kind, key, exc)

    def start(self, spawn: Callable[..., Any]) -> None:
        spawn(self._listen)

    def _listen(self) -> None:
        while True:
            pubsub = self._listener.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]  # as parse_url
            try:
                pubsub.subscribe(self.channel)
                while True:
                    raw = pubsub.get_message(timeout=1.0)
                    if raw is not None:
                        self._receive(raw.get("data"))
            except Exception as exc:
                log.warning("peer signals: Redis listener failed (%s); reconnecting in %g s", exc, self._retry_s)
            finally:
                pubsub.close()
            time.sleep(self._retry_s)

    def _receive(self, data: Any) -> None:
        try:
            signal = json.loads(data)
            sender, kind, key = signal["from"], signal["kind"], signal["key"]
        except (TypeError, ValueError, KeyError):
            log.warning("peer signals: ignored a malformed message %r", data)
            return
        if sender != self._process_id:
            self._dispatch(kind, key)


def build_peer_signals(redis_url: str | None, process_id: str) -> PeerSignals:
    return RedisPeerSignals(redis_url, process_id) if redis_url else PeerSignals()

"""The Socket.IO message queue between server processes, batched (README "Several processes").

python-socketio's Redis queue handles an emit in this process at once, then publishes it for the others: one
Redis round trip inside the emitting green thread, per emit; a stream's chunks go through it one by one. Every
process, the sender too, then decodes every message, and a peer encodes the packet of a room it holds no
client of before finding nobody to send it to. On two processes that was about a twentieth of a server's CPU
while streaming (bench/load.py --processes 2 --profile). This manager keeps the semantics (each emit handled
here first, then the peers in the order emitted) and cuts the waste:

- what queued up while the publishing task waited goes out as one Redis message, from one background task
  (under load a batch holds many emits; idle, an emit leaves at once);
- a batch starts with its sender's id: the sender skips its own without decoding them;
- a peer drops an emit to a room it holds no client of before encoding anything (nothing would be sent).

A message in python-socketio's own format (one JSON object) is still understood.
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import Any

import socketio

log = logging.getLogger(__name__)

HEAD = b"batch:"  # b"batch:<sender's host id>:<JSON list of python-socketio queue messages>"
BATCH_MAX = 256  # emits per Redis message: a bound on one message's size
OUTBOX_MAX = 50_000  # emits waiting for a Redis that hangs: beyond, they are dropped (the event logs keep them)


class BatchedRedisManager(socketio.RedisManager):  # type: ignore[misc]  # python-socketio ships no type information
    connected: bool  # python-socketio's: whether its Redis client is connected

    def __init__(self, url: str, channel: str) -> None:
        super().__init__(url, channel=channel)
        self._own_head = HEAD + self.host_id.encode() + b":"
        self._outbox: Any = None
        self._starting = threading.Lock()
        self._dropping = False

    def _publish(self, data: dict[str, Any]) -> None:
        """Queued for the publishing task (python-socketio calls this after handling the emit here). The task
        starts with the first message: a process emits before its first client connects, which is when
        python-socketio initializes its manager."""
        if self._outbox is None:
            with self._starting:
                if self._outbox is None:
                    outbox = self.server.eio.create_queue(OUTBOX_MAX)
                    self.server.start_background_task(self._publish_forever, outbox)
                    self._outbox = outbox
        try:
            self._outbox.put_nowait(data)
            self._dropping = False
        except queue.Full:  # eventlet's Full is the standard library's
            if not self._dropping:
                log.error("Redis has not taken the last %d Socket.IO messages; dropping new ones until it does "
                          "(clients of other processes read them from the event logs)", OUTBOX_MAX)
            self._dropping = True

    def _publish_forever(self, outbox: Any) -> None:
        while True:
            self.publish_batch(self.next_batch(outbox))

    def next_batch(self, outbox: Any) -> list[dict[str, Any]]:
        """The oldest queued message (waiting for one) and every one queued behind it, up to BATCH_MAX."""
        batch = [outbox.get()]
        empty = self.server.eio.get_queue_empty_exception()
        while len(batch) < BATCH_MAX:
            try:
                batch.append(outbox.get_nowait())
            except empty:
                break
        return batch

    def publish_batch(self, batch: list[dict[str, Any]]) -> None:
        """One PUBLISH; reconnects and tries once more, then drops the batch with an error logged, as
        python-socketio's own manager does with a message."""
        payload = self._own_head + self.json.dumps(batch).encode()
        for attempt in (1, 2):
            try:
                if not self.connected:
                    self._redis_connect()
                self.redis.publish(self.channel, payload)
                return
            except Exception as exc:
                self.connected = False
                log.error("could not publish %d Socket.IO message(s) to Redis (attempt %d): %s", len(batch), attempt,
                          exc)

    def _listen(self) -> Any:
        for raw in super()._listen():
            yield from self.unpack(raw)

    def unpack(self, raw: bytes | str) -> list[Any]:
        """The messages of one Redis message that this process has to handle."""
        if isinstance(raw, str):
            raw = raw.encode()
        if not raw.startswith(HEAD):
            return [raw]  # python-socketio's own format: its listener decodes it
        if raw.startswith(self._own_head):
            return []
        try:
            messages = self.json.loads(raw[raw.index(b":", len(HEAD)) + 1:])
        except ValueError:
            log.warning("ignored a malformed Socket.IO queue message of %d bytes", len(raw))
            return []
        return [m for m in messages if isinstance(m, dict) and not self._nobody_here(m)]

    def _nobody_here(self, message: dict[str, Any]) -> bool:
        """An emit to a room without a client of this process: handling it would encode a packet for nobody."""
        room = message.get("room")
        if message.get("method") != "emit" or room is None:
            return False
        return not self.rooms.get(message.get("namespace") or "/", {}).get(room)

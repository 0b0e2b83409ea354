"""The batched Socket.IO message queue (server/socket_queue.py): emits queued meanwhile leave as one Redis message
in their order, a process skips its own batches, a peer keeps only what reaches a client of its own; over the
real Redis, on a channel of the test's own."""

from __future__ import annotations

import queue
import threading
import uuid
from types import SimpleNamespace

import redis

from modules.event_catalogue import TextChunkEvent
from server.socket_packets import TolerantPacket
from server.socket_queue import HEAD, BatchedRedisManager
from test.conftest import wait_until

CHUNK = TextChunkEvent.TYPE


class FakeServer:
    """What the manager asks of python-socketio's server: queues and background tasks (recorded, not run)."""

    packet_class = TolerantPacket

    def __init__(self) -> None:
        self.eio = SimpleNamespace(create_queue=queue.Queue, get_queue_empty_exception=lambda: queue.Empty)
        self.tasks: list[tuple] = []

    def start_background_task(self, fn, *args):
        self.tasks.append((fn, args))


class FakeRedis:
    def __init__(self) -> None:
        self.published: list[tuple[str, bytes]] = []

    def publish(self, channel: str, payload: bytes) -> int:
        self.published.append((channel, payload))
        return 1


def manager(url: str = "redis://127.0.0.1:6379/0", channel: str = "test") -> BatchedRedisManager:
    m = BatchedRedisManager(url, channel)
    m.set_server(FakeServer())
    return m


def test_emits_queued_meanwhile_leave_as_one_redis_message_in_their_order():
    m = manager()
    for k in range(3):
        m.emit(CHUNK, {"idx": k}, room="conversation-1")
    assert len(m.server.tasks) == 1  # one publishing task, started by the first emit (before any client)
    _, (outbox,) = m.server.tasks[0]
    fake = FakeRedis()
    m.redis, m.connected = fake, True
    m.publish_batch(m.next_batch(outbox))
    assert len(fake.published) == 1
    channel, payload = fake.published[0]
    assert channel == "test" and payload.startswith(HEAD + m.host_id.encode() + b":")
    peer = manager()
    peer.basic_enter_room("sid-1", "/", "conversation-1", eio_sid="eio-1")
    assert [(msg["event"], msg["data"]) for msg in peer.unpack(payload)] == [
        (CHUNK, [{"idx": 0}]), (CHUNK, [{"idx": 1}]), (CHUNK, [{"idx": 2}])]


def test_a_process_skips_its_own_batches_and_a_peer_the_rooms_it_holds_no_client_of():
    sender, peer = manager(), manager()
    peer.basic_enter_room("sid-1", "/", "here", eio_sid="eio-1")
    batch = [{"method": "emit", "event": "e", "data": [1], "namespace": "/", "room": "elsewhere",
              "host_id": sender.host_id},
             {"method": "emit", "event": "e", "data": [2], "namespace": "/", "room": "here", "host_id": sender.host_id},
             {"method": "emit", "event": "e", "data": [3], "namespace": "/", "room": None, "host_id": sender.host_id},
             {"method": "disconnect", "sid": "sid-9", "namespace": "/", "host_id": sender.host_id}]
    payload = HEAD + sender.host_id.encode() + b":" + sender.json.dumps(batch).encode()
    assert sender.unpack(payload) == []
    assert [msg.get("data") for msg in peer.unpack(payload)] == [[2], [3], None]
    plain = b'{"method": "emit", "event": "e", "data": [4], "namespace": "/", "room": "x", "host_id": "other"}'
    assert peer.unpack(plain) == [plain]  # python-socketio's own format: its listener decodes it
    assert peer.unpack(HEAD + b"other:not json") == []


def test_a_peer_hears_a_batch_through_redis(redis_url):
    channel = f"test-socket-queue-{uuid.uuid4().hex}"
    sender, peer = manager(redis_url, channel), manager(redis_url, channel)
    peer.basic_enter_room("sid-1", "/", "room", eio_sid="eio-1")
    heard: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [heard.put(msg) for msg in peer._listen()], daemon=True).start()
    probe = redis.Redis.from_url(redis_url)
    wait_until(lambda: dict(probe.pubsub_numsub(channel)).get(channel.encode(), 0) >= 1, 10,
               what="the peer to subscribe")
    sender.emit(CHUNK, {"idx": 0}, room="room")
    sender.emit(CHUNK, {"idx": 1}, room="room")
    _, (outbox,) = sender.server.tasks[0]
    sender.publish_batch(sender.next_batch(outbox))
    got = [heard.get(timeout=10), heard.get(timeout=10)]
    assert [msg["data"] for msg in got] == [[{"idx": 0}], [{"idx": 1}]]
    assert all(msg["host_id"] == sender.host_id for msg in got)


def test_emits_beyond_the_outbox_are_dropped_not_held_while_redis_hangs(monkeypatch, caplog):
    monkeypatch.setattr("server.socket_queue.OUTBOX_MAX", 2)
    m = manager()
    for k in range(4):  # nothing publishes: the publishing task is recorded, not run
        m.emit(CHUNK, {"idx": k}, room="conversation-1")
    _, (outbox,) = m.server.tasks[0]
    assert [msg["data"] for msg in m.next_batch(outbox)] == [[{"idx": 0}], [{"idx": 1}]]
    assert sum("dropping new ones" in r.message for r in caplog.records) == 1  # once per episode

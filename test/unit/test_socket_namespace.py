"""The socket surface through Flask-SocketIO's test client: building the server starts no thread, so a test
drives `ChatNamespace` in process, with the answers (and refusals) REST gives."""

from __future__ import annotations

import threading
import time

import pytest

from modules.config import Settings
from modules.event_catalogue import RouteEvent
from modules.statuses import Delivery, SendStatus
from modules.storage import tasks as task_store
from server.api.response_models import SendAccepted
from server.app import create_app

DEADLINE_S = 30


@pytest.fixture
def server(tmp_path):
    before = set(threading.enumerate())
    built = create_app(Settings(database_url=f"sqlite:///{tmp_path / 'app.db'}", data_dir=tmp_path, sandbox="off",
                                demo_chunk_delay_s=0.0), async_mode="threading")
    assert set(threading.enumerate()) <= before, "building the server started a thread"
    yield built
    built.runtime.db.dispose()


def _ack(client, event, data):
    ack = client.emit(event, data, callback=True)
    assert isinstance(ack, dict), f"{event} was not acknowledged"
    return ack


def _until(check, what):
    deadline = time.monotonic() + DEADLINE_S
    while not (found := check()):
        assert time.monotonic() < deadline, f"no {what} within {DEADLINE_S} s"
        time.sleep(0.02)
    return found


def test_a_socket_send_is_acknowledged_with_the_rest_answer_and_a_refusal_with_its_status(server):
    client = server.socketio.test_client(server.app)
    assert client.is_connected()
    stale = _ack(client, "send_message", {"message": "yes", "question_id": "q_1"})
    assert (stale["status"], stale["code"], stale["success"]) == (409, "stale_question", False)
    assert _ack(client, "send_message", ["not", "an", "object"])["status"] == 400
    assert _ack(client, "stop_task", {"task_id": "nope"})["status"] == 404
    for event in ("join_conversation", "stop_task"):  # not an object: what was sent is wrong, not what it names
        refused = _ack(client, event, "t_1")
        assert (refused["status"], refused["code"]) == (400, "invalid_json"), (event, refused)

    # Not started (no membership loop, no prober to outlive the test): a send still routes and runs its turn.
    sent = _ack(client, "send_message", {"message": "hello"})
    assert SendAccepted.model_validate(sent) == SendAccepted(
        message_id=sent["message_id"], conversation_id=sent["conversation_id"], status=SendStatus.ROUTING)
    joined = _ack(client, "join_conversation", {"conversation_id": sent["conversation_id"]})
    assert joined["success"] is True and joined["conversation_id"] == sent["conversation_id"]
    route = _until(lambda: next((e["args"][0] for e in client.get_received() if e["name"] == RouteEvent.TYPE), None),
                   "route event")
    assert route["message_id"] == sent["message_id"] and route["delivery"] == Delivery.TRIGGERED_NEW_TURN
    db = server.runtime.db
    _until(lambda: all(t.status in task_store.FINAL_STATUSES
                       for t in task_store.list_tasks(db, sent["conversation_id"])), "end of the turn")
    client.disconnect()

"""Two server processes behind nginx (deploy/run_cluster.py, README "Several processes"): a client streams a
reply through the balancer over WebSocket, and over HTTP long-polling, whose several requests per session
reach one process only thanks to the sticky cookie (without it, half of them would land on the other
process, which does not know the session)."""

from __future__ import annotations

import threading

import pytest
import requests
import socketio

from deploy.run_cluster import Cluster
from modules.event_catalogue import AiMessageStartEvent, ErrorEvent, TaskCompleteEvent, TaskEndEvent, TextChunkEvent
from test.conftest import free_port, wait_until
from test.db_urls import fresh_database
from test.scripted_llm import text

REPLY = "a reply streamed through nginx in several chunks"


def stream_one_reply(url: str, transport: str) -> tuple[list[str], str]:
    """Create a conversation, join it on a socket of `transport`, send, and collect the reply's events."""
    http = requests.Session()  # keeps the balancer's cookie, as a browser does
    cid = http.post(url + "/api/conversations", json={"title": transport}, timeout=10).json()["conversation_id"]
    events: list[str] = []
    chunks: list[str] = []
    done = threading.Event()
    client = socketio.Client(reconnection=False, http_session=http)

    @client.on("*")
    def on_event(event: str, data: dict) -> None:
        events.append(event)
        if event == TextChunkEvent.TYPE:
            chunks.append(data["content"])
        if event in (TaskCompleteEvent.TYPE, ErrorEvent.TYPE, TaskEndEvent.TYPE):
            done.set()

    client.connect(url, transports=[transport], wait_timeout=10)
    try:
        assert client.call("join_conversation", {"conversation_id": cid}, timeout=10)["success"] is not False
        assert client.call("send_message", {"conversation_id": cid, "message": "hello"}, timeout=10)["success"]
        assert done.wait(30), events
    finally:
        client.disconnect()
    return events, "".join(chunks)


@pytest.mark.parametrize("transport", ["websocket", "polling"])
def test_a_reply_streams_through_nginx_in_front_of_two_processes(llm, tmp_path, redis_url, transport):
    llm.set_default(text(REPLY, chunk_size=6, delay_s=0.02))
    env = {"OPENAI_BASE_URL": llm.base_url, "OPENAI_API_KEY": "test-key", "LLM_MODEL": "scripted-model",
           "LOG_LEVEL": "WARNING"}
    with fresh_database("postgresql", tmp_path) as url:
        cluster = Cluster(url, redis_url, free_port(), [free_port(), free_port()], env=env, run_dir=tmp_path / "run")
        with cluster:
            assert len(cluster.pids) == 2 and all(p.poll() is None for p in cluster.servers)
            for _ in range(3):  # each a fresh session: the balancer picks a process per new client
                events, streamed = stream_one_reply(cluster.url, transport)
                assert streamed == REPLY, cluster.log_tail()
                assert (events.index(AiMessageStartEvent.TYPE) < events.index(TextChunkEvent.TYPE)
                        < events.index(TaskCompleteEvent.TYPE))


def test_nginx_caps_the_connections_of_one_client_address(llm, tmp_path, redis_url):
    """Behind nginx the servers see one address for every client, so nginx keeps the per-client cap
    (limit_conn): with a cap of 2, two open sockets of one address leave a third request refused with 429."""
    env = {"OPENAI_BASE_URL": llm.base_url, "OPENAI_API_KEY": "test-key", "LLM_MODEL": "scripted-model",
           "LOG_LEVEL": "WARNING"}
    with fresh_database("postgresql", tmp_path) as url:
        cluster = Cluster(url, redis_url, free_port(), [free_port()], env=env, run_dir=tmp_path / "run",
                          per_client_connections=2)
        with cluster:
            clients = [socketio.Client(reconnection=False) for _ in range(2)]
            try:
                for client in clients:
                    client.connect(cluster.url, transports=["websocket"], wait_timeout=10)
                refused = requests.get(cluster.url + "/healthz", timeout=10)
                assert refused.status_code == 429
            finally:
                for client in clients:
                    client.disconnect()
            wait_until(lambda: requests.get(cluster.url + "/healthz", timeout=10).status_code == 200, 10,
                       what="nginx to count the closed sockets out")

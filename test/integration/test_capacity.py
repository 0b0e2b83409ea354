"""One process takes more connections than eventlet's default pool of 1,024 (README, "Configuration")."""

from __future__ import annotations

import re
import resource
import socket

import pytest
import requests

IDLE = 1_100


@pytest.mark.skipif(resource.getrlimit(resource.RLIMIT_NOFILE)[1] < IDLE + 512, reason="file limit too low")
def test_a_healthz_is_answered_while_more_than_1024_clients_hold_connections(make_server):
    server = make_server(env={"CLIENT_MAX_CONNECTIONS": str(IDLE + 100)})  # all from one address
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < IDLE + 256:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, IDLE + 512), hard))
    capacity = re.search(r"capacity (\d+) concurrent connections \(open-file limit (\d+)\)", server.log_text())
    assert capacity and int(capacity.group(1)) > IDLE, server.log_text()
    held = []
    try:
        for _ in range(IDLE):  # each holds a green thread: its request never ends
            conn = socket.create_connection(("127.0.0.1", server.port), timeout=10)
            conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            held.append(conn)
        assert requests.get(server.url + "/healthz", timeout=10).status_code == 200
    finally:
        for conn in held:
            conn.close()

"""Slow and greedy clients cannot lock others out (README, "Configuration": CLIENT_* settings).

Real half-open sockets, without a token: connections that never finish their headers, that trickle them
a byte at a time, or that never send a byte, from one address, far more of them than the server has green
threads. Another client, from another address, is answered within a second all along.
"""

from __future__ import annotations

import select
import socket
import time

import pytest

from test.conftest import TWO_USERS, wait_until
from test.integration.hostile_clients import LOW_FILE_LIMIT_LAUNCHER, other_client

SLOW = 520  # connections that never finish their headers, more than the pool has threads


def closed_by_server(sock: socket.socket) -> bool:
    try:
        return sock.recv(4096) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def refusals(socks: list[socket.socket]) -> int:
    """How many of `socks` were answered 429 `too_many_connections`: read until none speaks for 2 s."""
    count, waiting = 0, list(socks)
    while waiting:
        ready = select.select(waiting, [], [], 2)[0]
        if not ready:
            break
        for sock in ready:
            waiting.remove(sock)
            try:
                head = sock.recv(4096)
            except ConnectionResetError:
                continue
            count += head.startswith(b"HTTP/1.1 429") and b"too_many_connections" in head
    return count


@pytest.fixture
def guarded(make_server):
    server = make_server(launcher=LOW_FILE_LIMIT_LAUNCHER, env={
        "AUTH_TOKENS": TWO_USERS, "CLIENT_HEADER_TIMEOUT_S": "4", "CLIENT_IDLE_TIMEOUT_S": "5",
        "CLIENT_MAX_CONNECTIONS": "100"})
    server.token = "tok-bob"
    return server


def test_half_open_and_trickling_sockets_lock_nobody_out_and_are_closed(guarded):
    server = guarded
    cid = server.post("/api/conversations", {"title": "bob's"}).json()["conversation_id"]
    silent: list[socket.socket] = []
    trickling: list[socket.socket] = []
    try:
        opened = time.monotonic()  # a socket opened more than the header timeout ago may have been closed
        for i in range(SLOW):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            if i % 2:
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
                trickling.append(sock)
            else:
                silent.append(sock)
        refused = refusals(silent + trickling)
        # past the cap: a 429, closed at once (a slot freed by a header timeout meanwhile lets one more in:
        # on a busy machine opening the sockets alone can outlast the 4 s timeout)
        assert refused <= SLOW - 100 and (refused >= SLOW - 100 - 5 or time.monotonic() - opened > 4), refused
        for _ in range(3):
            status, took = other_client(server, "GET", "/healthz")
            assert (status, took < 1) == (200, True), took
            status, took = other_client(server, "POST", "/api/tasks", {"message": "hello", "conversation_id": cid})
            assert (status, took < 1) == (202, True), took
            status, took = other_client(server, "GET", f"/api/conversations/{cid}/files")
            assert (status, took < 1) == (200, True), took
            for sock in trickling:
                try:
                    sock.send(b"x")
                except OSError:
                    pass
        # the ones let in are closed by the server once their header (4 s) or idle (5 s) time is up
        for sock in silent + trickling:
            sock.settimeout(0.1)
        wait_until(lambda: all(closed_by_server(s) for s in silent + trickling), 10,
                   what="the server closing every slow connection")
    finally:
        for sock in silent + trickling:
            sock.close()
    assert other_client(server, "GET", "/healthz")[0] == 200

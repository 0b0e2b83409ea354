"""The suite's servers listen on ports no outgoing connection can hold (test/conftest.py, `free_port`): a port from
the kernel's ephemeral range became a client's local port before nginx bound it, while a benchmark held 5,500
client connections, and the cluster test failed with `bind() ... (98: Address already in use)`."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from test.conftest import free_port

RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


@pytest.mark.skipif(not RANGE.exists(), reason="Linux's ephemeral port range only")
def test_a_free_port_lies_below_the_ephemeral_range_and_is_free():
    low = int(RANGE.read_text().split()[0])
    ports = [free_port() for _ in range(50)]
    assert all(port < low for port in ports), ports
    for port in ports[:5]:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))

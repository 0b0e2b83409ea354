"""Hostile clients and files for the tests that show the server stays answerable (test_slow_clients.py,
test_workspace_files_never_block.py, test_attack_suite.py): a server with few open files, the other client
from another address, a file swapped for a named pipe under its name."""

from __future__ import annotations

import http.client
import json
import os
import threading
import time

import requests

FILE_LIMIT = 700  # the server's open-file limit: a pool of 444 green threads (run.py keeps 256 spare)
# The server is started with a low open-file limit, so that a few hundred sockets fill its pool.
LOW_FILE_LIMIT_LAUNCHER = ["-c", "import resource, sys\n"
                                 f"resource.setrlimit(resource.RLIMIT_NOFILE, ({FILE_LIMIT}, {FILE_LIMIT}))\n"
                                 "import run\nsys.exit(run.main(sys.argv[1:]))\n"]
OTHER_ADDRESS = "127.0.0.2"  # the other client: loopback, but another address


def other_client(server, method: str, path: str, body: dict | None = None) -> tuple[int, float]:
    """One request from OTHER_ADDRESS as bob; (status, seconds)."""
    started = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5, source_address=(OTHER_ADDRESS, 0))
    try:
        conn.request(method, path, body=json.dumps(body) if body is not None else None,
                     headers={"Authorization": "Bearer tok-bob", "Content-Type": "application/json"})
        status = conn.getresponse().status
    finally:
        conn.close()
    return status, time.monotonic() - started


class Swapper(threading.Thread):
    """Swaps a regular file and a named pipe under one name, as fast as rename allows, until stopped."""

    def __init__(self, folder, name: str):
        super().__init__(daemon=True)
        self.folder, self.name = folder, name
        self.stop = threading.Event()
        (folder / ".regular").write_bytes(b"regular content")
        os.mkfifo(folder / ".pipe")

    def run(self) -> None:
        target = self.folder / self.name
        while not self.stop.is_set():
            for source in (".regular", ".pipe"):
                os.link(self.folder / source, self.folder / ".next")
                os.replace(self.folder / ".next", target)

    def unblock(self) -> None:
        """Open the pipe for writing, so a reader the server left waiting in the kernel goes on."""
        try:
            os.close(os.open(self.folder / ".pipe", os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass


def get_as(server, path: str, timeout: float, token: str = "tok-alice") -> requests.Response:
    """A GET as a user of TWO_USERS (alice by default), bounded by `timeout`."""
    return requests.get(server.url + path, headers={"Authorization": f"Bearer {token}"}, timeout=timeout)

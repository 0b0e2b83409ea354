"""Fixtures of the router's integration tests: one server per module, gates that hold model calls open."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from test.conftest import ServerProcess, wait_until
from test.integration.router.team import idle_everywhere


class Gates:
    """Events that hold model calls open; all are released at the end so no scripted call lingers."""

    def __init__(self) -> None:
        self.made: list[threading.Event] = []

    def __call__(self) -> threading.Event:
        self.made.append(threading.Event())
        return self.made[-1]

    def release(self) -> None:
        for gate in self.made:
            gate.set()


@pytest.fixture
def gates() -> Iterator[Gates]:
    made = Gates()
    yield made
    made.release()


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory, llm_server) -> Iterator[ServerProcess]:
    """One server for the tests of this module that need no special settings or restarts (each
    test works in its own conversation); starting a server per test would triple the run time."""
    proc = ServerProcess(tmp_path_factory.mktemp("router"), llm_server.base_url).start()
    yield proc
    proc.stop()


@pytest.fixture
def server(shared_server, llm, gates) -> Iterator[ServerProcess]:
    """The shared server; after the test every conversation must come to rest, so that no turn of
    this test reaches the scripted model during the next one."""
    yield shared_server
    gates.release()
    for conv in shared_server.get("/api/conversations").json()["data"]:
        wait_until(lambda c=conv["conversation_id"]: idle_everywhere(shared_server, c), timeout=20,
                   what=f"conversation {conv['conversation_id']} at rest after the test")

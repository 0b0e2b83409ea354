"""Writers queued, in a known order, behind a group-commit batch that holds the lead, so that they go out
together in the next batch: how a test puts chosen writers in one transaction (modules/storage/group_commit.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from modules.storage.group_commit import GroupCommit
from test.conftest import wait_until


class HeldBatch:
    """`queue` the writers (each step's outcome kept by its name: "ok" or what it raised), `release` the held batch,
    then `join` for the outcomes."""

    def __init__(self, writer: GroupCommit):
        self._writer = writer
        self._hold = threading.Event()
        self._threads = [threading.Thread(target=writer.call, args=(lambda s: self._hold.wait(30),), daemon=True)]
        self._threads[0].start()
        wait_until(lambda: writer._leading and not writer._queue, what="a batch holding the lead")
        self.outcomes: dict[str, object] = {}

    def queue(self, steps: dict[str, Callable[[Any], Any]]) -> None:
        """Queue one writer a step, in the order given: the first leads the next batch, the others in it."""
        queued = len(self._writer._queue)
        for name, step in steps.items():
            thread = threading.Thread(target=self._write, args=(name, step), daemon=True)
            self._threads.append(thread)
            thread.start()
            queued += 1
            wait_until(lambda n=queued: len(self._writer._queue) == n, what="the write queued behind the held batch")

    def release(self) -> None:
        self._hold.set()

    def join(self) -> dict[str, object]:
        for thread in self._threads:
            thread.join(30)
        return self.outcomes

    def _write(self, name: str, step: Callable[[Any], Any]) -> None:
        try:
            self._writer.call(step)
            self.outcomes[name] = "ok"
        except BaseException as exc:  # noqa: BLE001 - the outcome is what is checked
            self.outcomes[name] = exc

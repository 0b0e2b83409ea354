"""Whether the database answers: one prober decides, so callers never each wait to find out.

Any transaction that fails for want of the database makes the prober look at
once; while the database is away it looks every `interval_s` until it answers
again. Listeners hear each change (the server tells socket clients, and API
requests answer 503 at once instead of waiting out a timeout each).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HealthChange:
    available: bool
    since: float  # time.time() of the change
    reason: str  # why it went away ("" when it came back)


class DatabaseHealth:
    def __init__(self, probe: Callable[[], str | None], *, interval_s: float = 0.5):
        """`probe` answers None when the database answered, else why it did not."""
        self._probe = probe
        self._interval_s = interval_s
        self._wake = threading.Event()
        self._listeners: list[Callable[[HealthChange], None]] = []
        self.available = True
        self.since = time.time()
        self.reason = ""

    def subscribe(self, listener: Callable[[HealthChange], None]) -> None:
        self._listeners.append(listener)

    def suspect(self) -> None:
        """A transaction failed for want of the database: look now."""
        self._wake.set()

    def check(self) -> bool:
        """Probe once and record the answer; True when the database answered."""
        reason = self._probe()
        available = reason is None
        if available != self.available:
            self.available, self.since, self.reason = available, time.time(), reason or ""
            change = HealthChange(available, self.since, self.reason)
            if available:
                log.warning("the database answers again")
            else:
                log.error("database probe failed: %s", reason)
            for listener in self._listeners:
                try:
                    listener(change)
                except Exception:
                    log.exception("a database health listener failed")
        return available

    def run(self) -> None:
        """The prober's loop; never returns."""
        while True:
            self._wake.wait(None if self.available else self._interval_s)
            self._wake.clear()
            try:
                self.check()
            except Exception:
                log.exception("database probe failed")

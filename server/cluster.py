"""This process's membership among the server processes that share one database.

A background loop heartbeats, applies stop requests that other processes wrote
for this process's tasks and background commands (at once when a peer signal
says so, else at the next poll), and takes over the work of processes that are gone
(their tasks and commands, then, through `on_take_over`, their held messages).
One process or several, the same code runs: a single process simply finds no
peers.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Protocol

from sqlalchemy.exc import InterfaceError, OperationalError

from modules.background_command_manager import BackgroundCommandManager
from modules.storage import processes
from modules.storage.db import Database
from modules.storage.health import HealthChange

log = logging.getLogger(__name__)


class InterruptedWork(Protocol):
    """What the loop asks of the TurnManager (server/turns/manager.py, which imports this module)."""

    def recover_interrupted(self, gone: dict[str, str]) -> int: ...

    def apply_stop_requests(self) -> None: ...

TICK_S = 1.0
HEARTBEAT_S = 2.0
TIMEOUT_S = 10.0
SWEEP_S = 5.0


class Membership:
    def __init__(self, db: Database, *, poll_s: float = TICK_S):
        self._db = db
        self._poll_s = poll_s
        self.process_id = processes.register(db)
        self._trust_heartbeats_at = 0.0
        self._take_over_too: list[Callable[[], None]] = []
        db.health.subscribe(self._on_health)

    def on_take_over(self, step: Callable[[], None]) -> None:
        """Run `step` at each take-over, after the gone processes are forgotten (the routing inbox claims the
        held messages no registered process routes: server/routing_inbox.py)."""
        self._take_over_too.append(step)

    def _on_health(self, change: HealthChange) -> None:
        """No process could beat while the database was away: a stale heartbeat means nothing until every
        live process has had the time to beat again (a pid that is gone still counts at once)."""
        if change.available:
            self._trust_heartbeats_at = time.monotonic() + TIMEOUT_S

    def _timeout_s(self) -> float:
        return TIMEOUT_S if time.monotonic() >= self._trust_heartbeats_at else math.inf

    def alive(self) -> set[str]:
        return processes.alive_processes(self._db, self.process_id, self._timeout_s())

    def gone(self) -> dict[str, str]:
        return processes.gone_processes(self._db, self.process_id, self._timeout_s())

    def take_over(self, tasks: InterruptedWork) -> int:
        """Recover the work of gone processes, forget them, then run the `on_take_over` steps."""
        gone = self.gone()
        recovered = tasks.recover_interrupted(gone)
        processes.forget(self._db, gone)
        for step in self._take_over_too:
            step()
        return recovered

    def run(self, tasks: InterruptedWork, commands: BackgroundCommandManager) -> None:
        """The loop; never returns. `tasks` is the TurnManager (server/turns/manager.py), `commands` the
        BackgroundCommandManager. The heartbeat beats in a loop of its own, on a connection of its own
        (`Database.write_control`): a stop poll or a sweep that waits for the database never delays it."""
        threading.Thread(target=self.beat_forever, name="heartbeat", daemon=True).start()
        last_sweep = last_poll = time.monotonic()
        while True:
            time.sleep(TICK_S)
            try:
                current = time.monotonic()
                if current - last_poll >= self._poll_s:
                    tasks.apply_stop_requests()
                    commands.apply_cancel_requests()
                    last_poll = current
                if current - last_sweep >= SWEEP_S:
                    self.take_over(tasks)
                    last_sweep = current
            except (OperationalError, InterfaceError) as exc:  # an outage: the prober reports it once
                log.warning("membership loop: no database (%s); retrying", str(exc).splitlines()[0])
            except Exception:
                log.exception("membership loop failed; retrying")

    def beat_forever(self) -> None:
        while True:
            time.sleep(HEARTBEAT_S)
            try:
                processes.heartbeat(self._db, self.process_id)
            except (OperationalError, InterfaceError) as exc:
                log.warning("heartbeat: no database (%s); retrying", str(exc).splitlines()[0])
            except Exception:
                log.exception("heartbeat failed; retrying")

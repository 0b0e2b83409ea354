"""Who awaits the next turn of an agent: a blocking create_sub_agent (docs/ARCHITECTURE.md)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from modules.sub_agent.manager import TurnResult


class TurnWaiter:
    """The next turn of one agent, awaited by a blocking create_sub_agent."""

    def __init__(self, waiters: TurnWaiters, agent_id: str):
        self._waiters = waiters
        self.agent_id = agent_id
        self.event = threading.Event()
        self.result: TurnResult | None = None
        self.closed = False  # it gave up: a result handed now is refused (its turn's end sends a notice instead)

    def wait(self, timeout_s: float, should_stop: Callable[[], bool]) -> TurnResult | None:
        deadline = time.monotonic() + timeout_s
        try:
            while not self.event.is_set() and not should_stop():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self.event.wait(min(0.1, remaining))
        finally:
            self.cancel()
        return self.result  # settled by `cancel`: no result is handed to it after this

    def cancel(self) -> None:
        self._waiters.drop(self)

    def hand(self, result: TurnResult) -> bool:
        """Give it the result; False when it gave up first (then the result is the caller's to send on)."""
        return self._waiters.hand(self, result)


class TurnWaiters:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_agent: dict[str, TurnWaiter] = {}

    def expect(self, agent_id: str) -> TurnWaiter:
        waiter = TurnWaiter(self, agent_id)
        with self._lock:
            self._by_agent[agent_id] = waiter
        return waiter

    def awaited(self, agent_id: str) -> bool:
        with self._lock:
            return agent_id in self._by_agent

    def pop(self, agent_id: str) -> TurnWaiter | None:
        with self._lock:
            return self._by_agent.pop(agent_id, None)

    def drop(self, waiter: TurnWaiter) -> None:
        with self._lock:
            waiter.closed = True
            if self._by_agent.get(waiter.agent_id) is waiter:
                del self._by_agent[waiter.agent_id]

    def hand(self, waiter: TurnWaiter, result: TurnResult) -> bool:
        """Hand or refuse under the lock its giving up takes, so a result is never handed to a wait that ended."""
        with self._lock:
            if waiter.closed:
                return False
            waiter.result = result
            waiter.event.set()
            return True

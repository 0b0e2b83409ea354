"""One watcher for the stop switches of every model request waiting in this process (issue 26).

A request's caller waits for its worker (modules/llm/openai_model.py) so that a stop is honoured at once, even
while the endpoint is silent. Each caller used to wake every 0.1 s to look at its switch: with 500 streams that
was 5,000 timer wake-ups a second, about 14 % of a core under eventlet before any work. Now the callers sleep
until their request ends or stops, and one thread looks at all their switches every `poll_s` and wakes the ones
that were stopped.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

POLL_S = 0.1


class StopWatch:
    def __init__(self, poll_s: float = POLL_S):
        self._poll_s = poll_s
        self._lock = threading.Lock()
        self._watched: dict[int, tuple[Callable[[], bool], threading.Event]] = {}
        self._next = 0
        self._running = False

    def watch(self, should_stop: Callable[[], bool], wake: threading.Event) -> int:
        """Set `wake` once `should_stop()` is true (looked at every `poll_s`) until `unwatch`; returns the token."""
        with self._lock:
            self._next += 1
            token = self._next  # read under the lock: starting the thread below yields to other watchers
            self._watched[token] = (should_stop, wake)
            start = not self._running
            self._running = True
        if start:
            threading.Thread(target=self._run, name="model-stop-watch", daemon=True).start()
        return token

    def unwatch(self, token: int) -> None:
        with self._lock:
            self._watched.pop(token, None)

    def _run(self) -> None:
        """Runs while anything is watched (it ends with the last, and `watch` starts another)."""
        while True:
            time.sleep(self._poll_s)
            with self._lock:
                if not self._watched:
                    self._running = False
                    return
                watched = list(self._watched.values())
            for should_stop, wake in watched:
                try:
                    stopped = should_stop()
                except Exception:  # a switch that cannot be read stops nothing; its request ends on its own
                    stopped = False
                if stopped:
                    wake.set()

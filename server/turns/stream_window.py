"""How long a streamed chunk waits for the next ones to join it (`STREAM_FLUSH_MS`, `STREAM_EVENTS_PER_S`).

Every event a stream sends is a log row and a socket packet for each client in its room. A model that streams a
chunk every 100 ms gives 500 streams 5,000 of them a second, more than one process can write and send: the
streams then fall behind and all of them wait (issue 26). So the window widens with the load: with S messages
streaming in the process, a message's later chunks wait S / `STREAM_EVENTS_PER_S` seconds (at most `MAX_WAIT_S`,
never less than `STREAM_FLUSH_MS`), and the process sends about that many chunk events a second however many
stream at once. The text is the same, in fewer and larger pieces. A message's first chunk (of its text, of its
reasoning) keeps `STREAM_FLUSH_MS`, so a reply starts to show as soon as without load; and a message's end
sends what waits at once, so the load delays no reply's end.
"""

from __future__ import annotations

from collections.abc import Hashable

MAX_WAIT_S = 1.0
# A task that started an event within this long counts as streaming: longer than the longest wait, so a task
# whose chunks wait that long (an event a second) still counts.
STREAMING_S = 2 * MAX_WAIT_S


class StreamWindow:
    """The wait of each chunk that starts an event. Called under the task's lock, from many threads; no lock of
    its own (one per chunk was a visible cost): a count off by one for a moment changes nothing."""

    def __init__(self, flush_s: float, events_per_s: float):
        self._flush_s = flush_s
        self._events_per_s = events_per_s
        self._last: dict[str, tuple[float, Hashable]] = {}  # task -> when its last event started, of what kind
        self._pruned = 0.0

    def wait(self, task_id: str, kind: Hashable, moment: float) -> float:
        """Seconds a chunk of `kind` (its message and event type) that arrived at `moment` waits."""
        last = self._last.get(task_id)
        self._last[task_id] = (moment, kind)
        if last is None or last[1] != kind:
            return self._flush_s
        return self.later(moment)

    def later(self, moment: float) -> float:
        """Seconds a message's later chunk waits now (the `/metrics` gauge `chat_stream_chunk_wait_seconds`)."""
        if self._events_per_s <= 0:
            return self._flush_s
        if moment - self._pruned > STREAMING_S:
            self._prune(moment)
        return min(MAX_WAIT_S, max(self._flush_s, len(self._last) / self._events_per_s))

    def forget(self, task_id: str) -> None:
        self._last.pop(task_id, None)

    def _prune(self, moment: float) -> None:
        self._pruned = moment
        for task_id, (at, _kind) in list(self._last.items()):
            if moment - at > STREAMING_S:
                self._last.pop(task_id, None)

"""An agent's history as one turn holds it between its model requests: each request reads only the entries
written since the one before (README, "Long conversations": the model's view is read before every request).

This is exact because an agent's history is append-only and its `seq` becomes visible in order: an entry is
never changed once written, and each append takes the next `seq` under the (agent_id, seq) unique key
(modules/storage/messages.py `append_in`), so no entry can appear later below one already read."""

from __future__ import annotations

from modules.context.view import HistoryRow
from modules.storage import messages as message_store
from modules.storage.db import Database


class HistoryTail:
    """The entries after the agent's newest summary, kept across one turn's requests."""

    def __init__(self, agent_id: str):
        self.agent_id = agent_id
        self._after: int | None = None  # the seq the held rows start after (the summary's `through_seq`)
        self._rows: list[HistoryRow] = []

    def read(self, db: Database, after_seq: int) -> list[HistoryRow]:
        """The entries after `after_seq`, in seq order: the ones held, plus what was written since the last
        read. A newer summary (a larger `after_seq`) drops the entries it covers; an older one reads anew."""
        if self._after is None or after_seq < self._after:
            self._rows = []
        elif after_seq > self._after:
            self._rows = [r for r in self._rows if r.seq > after_seq]
        self._after = after_seq
        last = max(self._rows[-1].seq, after_seq) if self._rows else after_seq
        self._rows.extend(HistoryRow.from_row(r) for r in message_store.history_after(db, self.agent_id, last))
        return list(self._rows)

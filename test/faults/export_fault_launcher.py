"""`run.py` whose export cannot read a history while the file named by EXPORT_FAULT_FILE exists: each agent's
history yields as many batches as the file's number, then its next read fails as a database that went away
(DatabaseUnavailable); EXPORT_BATCH and EXPORT_CHUNK_CHARS, when set, shrink the export's batches and chunks so
that a short conversation streams in several of each."""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import run  # noqa: E402  (patches the standard library for eventlet first)
from modules.storage import messages  # noqa: E402
from modules.storage.db import DatabaseUnavailable  # noqa: E402
from server.api import export, export_formats  # noqa: E402

FAULT = "injected: the database went away during the export"
_flag = Path(os.environ["EXPORT_FAULT_FILE"])
_history_batches = messages.history_batches


def _failing_batches(db, agent_id, batch):
    left = int(_flag.read_text() or 0) if _flag.exists() else None
    batches = _history_batches(db, agent_id, batch)
    while True:
        if left == 0:
            raise DatabaseUnavailable(FAULT)
        rows = next(batches, None)
        if rows is None:
            return
        left = None if left is None else left - 1
        yield rows


messages.history_batches = _failing_batches
if os.environ.get("EXPORT_BATCH"):
    export.BATCH = int(os.environ["EXPORT_BATCH"])
if os.environ.get("EXPORT_CHUNK_CHARS"):
    export_formats.CHUNK_CHARS = int(os.environ["EXPORT_CHUNK_CHARS"])

if __name__ == "__main__":
    sys.exit(run.main(sys.argv[1:]))

"""`run.py` whose routing worker cannot read a conversation's held messages while the file named by
ROUTING_FAULT_FILE exists (a failure that is no database outage, so nothing but the worker's own retries routes
them), with the worker's backoff shortened (ROUTING_RETRY_S, ROUTING_RETRY_MAX_S), for the retry's test."""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import run  # noqa: E402  (patches the standard library for eventlet first)
from modules.storage import unrouted  # noqa: E402
from server import routing_inbox  # noqa: E402

FAULT = "injected: the held messages cannot be read"
_flag = Path(os.environ["ROUTING_FAULT_FILE"])
_unrouted = unrouted.unrouted


def _failing_unrouted(db, conversation_id):
    if _flag.exists():
        raise RuntimeError(FAULT)
    return _unrouted(db, conversation_id)


unrouted.unrouted = _failing_unrouted
routing_inbox.RETRY_S = float(os.environ["ROUTING_RETRY_S"])
routing_inbox.RETRY_MAX_S = float(os.environ["ROUTING_RETRY_MAX_S"])

if __name__ == "__main__":
    sys.exit(run.main(sys.argv[1:]))

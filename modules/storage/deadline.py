"""A bound on how long one database transaction may wait, whatever the database does.

Driver timeouts do not cover every way a database can go away: a connection
that a proxy or a broken network accepts but never answers leaves psycopg
waiting on its socket forever. Under eventlet (the server), an
`eventlet.Timeout` interrupts that wait; SQLAlchemy then invalidates the
connection it interrupted. Without eventlet (scripts, unit tests) only the
driver and server timeouts apply.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager


class DeadlineExceeded(Exception):
    """The database did not answer within the deadline."""


def _green() -> bool:
    eventlet = sys.modules.get("eventlet")
    return eventlet is not None and eventlet.patcher.is_monkey_patched("socket")


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Raise DeadlineExceeded in the calling green thread once `seconds` have passed inside the block."""
    if not _green():
        yield
        return
    import eventlet

    timer = eventlet.Timeout(seconds)
    try:
        yield
    except eventlet.Timeout as fired:
        if fired is not timer:  # an outer deadline's: it is theirs to report
            raise
        raise DeadlineExceeded(f"the database did not answer within {seconds:g} s") from None
    finally:
        timer.cancel()

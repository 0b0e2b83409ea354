"""Retrying a database step until the database answers again, for the writes that must not be dropped."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from sqlalchemy.exc import InterfaceError, OperationalError

log = logging.getLogger(__name__)

T = TypeVar("T")
MAX_BACKOFF_S = 2.0  # once the database is back, a waiting step notices within this


def until_answered(step: Callable[[], T], what: str, *, first_backoff_s: float = 0.1) -> T:
    """Run `step` until it does not fail for want of the database (DatabaseUnavailable and the driver's
    connection errors), backing off between tries; any other error is the caller's."""
    attempt = 0
    while True:
        try:
            return step()
        except (OperationalError, InterfaceError) as exc:
            attempt += 1
            delay = min(first_backoff_s * 2 ** (attempt - 1), MAX_BACKOFF_S)
            log.warning("%s: the database did not take it (attempt %d, next in %.1f s): %s", what, attempt, delay,
                        str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            time.sleep(delay)

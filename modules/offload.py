"""Run blocking file-system work in eventlet's thread pool, off the event loop every client shares.

Under `run.py` (eventlet, monkey-patched) a call that blocks in the kernel stops every green thread; in
eventlet's `tpool` it blocks one OS thread only. Elsewhere (the smoke test's threaded app) it runs inline.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from eventlet import patcher, tpool

T = TypeVar("T")


def off_loop(fn: Callable[..., T], *args: object) -> T:
    if patcher.is_monkey_patched("thread"):
        result: T = tpool.execute(fn, *args)
        return result
    return fn(*args)

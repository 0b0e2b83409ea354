"""Per-user rate limits: how many of one kind of request a user may make per minute (README, "Configuration").

A fixed one-minute window per (kind, user), counted in Redis when REDIS_URL is set, so that every server
process shares one count, else in this process. A refused request learns how long until its window ends
(its `Retry-After`). When Redis does not answer, requests are let through (logged): a limit that fails
closed would make a Redis outage an outage of the whole service.

Other limits (usage budgets) can use the same limiter with kinds of their own.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import redis

log = logging.getLogger(__name__)

WINDOW_S = 60.0


@dataclass(frozen=True)
class Refusal:
    kind: str
    limit: int  # per window
    retry_after_s: int  # whole seconds until the window ends (at least 1)


class RateLimiter:
    def __init__(self, redis_url: str | None = None, *, clock: Callable[[], float] = time.time):
        self._clock = clock
        self._redis = redis.Redis.from_url(redis_url, socket_timeout=1, socket_connect_timeout=1) \
            if redis_url else None
        self._counts: dict[tuple[str, str, int], int] = {}
        self._lock = threading.Lock()

    def hit(self, kind: str, key: str, limit: int) -> Refusal | None:
        """Count one request of `kind` by `key`; a Refusal when it is past `limit` in the current window."""
        now = self._clock()
        window = int(now // WINDOW_S)
        count = self._count_redis(kind, key, window) if self._redis is not None else self._count_local(kind, key,
                                                                                                       window)
        if count is None or count <= limit:
            return None
        return Refusal(kind, limit, max(1, math.ceil((window + 1) * WINDOW_S - now)))

    def _count_redis(self, kind: str, key: str, window: int) -> int | None:
        name = f"rate:{kind}:{key}:{window}"
        client = self._redis
        if client is None:
            return None
        try:
            pipe = client.pipeline()
            pipe.incr(name)
            pipe.expire(name, int(WINDOW_S) + 5)
            count, _ = pipe.execute()
            return int(count)
        except redis.RedisError as exc:
            log.warning("rate limit %s not counted, Redis does not answer: %s", kind, exc)
            return None

    def _count_local(self, kind: str, key: str, window: int) -> int:
        with self._lock:
            if len(self._counts) > 10_000:  # windows past are forgotten
                self._counts = {k: v for k, v in self._counts.items() if k[2] >= window}
            slot = (kind, key, window)
            self._counts[slot] = self._counts.get(slot, 0) + 1
            return self._counts[slot]

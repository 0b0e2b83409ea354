"""The per-user rate limits of sends, new conversations and socket events (README, "Configuration"),
answered 429 `rate_limited` with `Retry-After` (REST) or an error acknowledgement (Socket.IO)."""

from __future__ import annotations

from modules.config import Settings
from modules.domain_errors import RateLimited
from modules.rate_limit import RateLimiter

SENDS, CONVERSATIONS, SOCKET_EVENTS = "sends", "conversations", "socket_events"
_SETTING = {SENDS: "RATE_LIMIT_SENDS_PER_MIN", CONVERSATIONS: "RATE_LIMIT_CONVERSATIONS_PER_MIN",
            SOCKET_EVENTS: "RATE_LIMIT_SOCKET_EVENTS_PER_MIN"}


def _limit(settings: Settings, kind: str) -> int:
    return {SENDS: settings.rate_limit_sends_per_min, CONVERSATIONS: settings.rate_limit_conversations_per_min,
            SOCKET_EVENTS: settings.rate_limit_socket_events_per_min}[kind]


def check(limiter: RateLimiter, settings: Settings, kind: str, user_id: int) -> None:
    """Count one request of `kind` by the user; `RateLimited` (429 `rate_limited`) past its limit."""
    limit = _limit(settings, kind)
    refusal = limiter.hit(kind, str(user_id), limit)
    if refusal is not None:
        raise RateLimited(f"more than {limit} {kind.replace('_', ' ')} a minute ({_SETTING[kind]}); "
                          f"retry in {refusal.retry_after_s} s", refusal.retry_after_s)

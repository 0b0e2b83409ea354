"""Small helpers shared by the repositories."""

from __future__ import annotations

import time
import uuid


def now() -> float:
    return time.time()


def new_id() -> str:
    return str(uuid.uuid4())


# `consumed_by` of a queued message that a blocked ask took: the prefix, then the question id. The router
# writes it (`ask_consumer`); recovery finds such answers by it (pending_messages.requeue_unwritten_answers_in).
ASK_CONSUMER_PREFIX = "ask:"


def ask_consumer(question_id: str) -> str:
    return f"{ASK_CONSUMER_PREFIX}{question_id}"

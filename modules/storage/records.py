"""Small helpers shared by the repositories."""

from __future__ import annotations

import time
import uuid


def now() -> float:
    return time.time()


def new_id() -> str:
    return str(uuid.uuid4())

"""Idempotent sends: a client_message_id is reserved before any work, and its answer replayed."""

from __future__ import annotations

from typing import Any

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError

from modules.storage.db import Database
from modules.storage.models import ClientRequest
from modules.storage.records import now
from modules.storage.results import rowcount

IN_PROGRESS: dict[str, Any] = {"in_progress": True}
# A reservation this old never got its answer: the process that made it died mid-send.
ABANDONED_AFTER_S = 120.0


def reserve(db: Database, user_id: int, client_message_id: str) -> dict[str, Any] | None:
    """None when this call reserved the id (go ahead); else the stored answer, or IN_PROGRESS."""
    try:
        with db.write() as s:
            s.add(ClientRequest(user_id=user_id, client_message_id=client_message_id,
                                response=IN_PROGRESS, created_at=now()))
        return None
    except IntegrityError:
        with db.read() as s:
            row = s.get(ClientRequest, (user_id, client_message_id))
        if row is None:
            return IN_PROGRESS
        if row.response == IN_PROGRESS and now() - row.created_at > ABANDONED_AFTER_S:
            with db.write() as s:
                taken = rowcount(s.execute(update(ClientRequest).where(
                    ClientRequest.user_id == user_id, ClientRequest.client_message_id == client_message_id,
                    ClientRequest.created_at == row.created_at,
                ).values(created_at=now()))) == 1
            return None if taken else IN_PROGRESS
        return row.response


def complete(db: Database, user_id: int, client_message_id: str, response: dict[str, Any]) -> None:
    with db.write() as s:
        s.execute(update(ClientRequest).where(
            ClientRequest.user_id == user_id, ClientRequest.client_message_id == client_message_id,
        ).values(response=response))


def release(db: Database, user_id: int, client_message_id: str) -> None:
    """Forget a reservation whose send failed, so the client may retry it."""
    with db.write() as s:
        row = s.get(ClientRequest, (user_id, client_message_id))
        if row is not None:
            s.delete(row)

"""Users: created on first sight of a configured name."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from modules.storage.db import Database
from modules.storage.models import User
from modules.storage.records import now


def get_or_create_user(db: Database, name: str) -> User:
    with db.read() as s:
        user = s.scalar(select(User).where(User.name == name))
    if user is not None:
        return user
    try:
        with db.write() as s:
            user = User(name=name, created_at=now())
            s.add(user)
        return user
    except IntegrityError:  # another request created it first
        with db.read() as s:
            return s.scalars(select(User).where(User.name == name)).one()

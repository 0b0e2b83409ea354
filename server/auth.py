"""Who is calling: a bearer token from AUTH_TOKENS, or the single local user when none are set."""

from __future__ import annotations

import hmac

from modules.config import Settings
from modules.domain_errors import Unauthorized
from modules.storage.db import Database
from modules.storage.users import get_or_create_user

LOCAL_USER = "local"


class Authenticator:
    def __init__(self, settings: Settings, db: Database):
        self._tokens = settings.auth_tokens
        self._db = db
        self._user_ids: dict[str, int] = {}

    def user_id_for(self, token: str | None) -> int:
        """The user id of a token; `Unauthorized` (401) when auth is on and the token is missing or unknown."""
        if not self._tokens:
            return self._user_id(LOCAL_USER)
        if not token:
            raise Unauthorized("missing bearer token (Authorization: Bearer <token>)")
        for known, user in self._tokens.items():
            if hmac.compare_digest(known.encode(), token.encode()):
                return self._user_id(user)
        raise Unauthorized("unknown token")

    def knows(self, token: str | None) -> bool:
        """Whether the token is a configured one (no database involved)."""
        if not token:
            return False
        return any(hmac.compare_digest(known.encode(), token.encode()) for known in self._tokens)

    def _user_id(self, name: str) -> int:
        if name not in self._user_ids:
            self._user_ids[name] = get_or_create_user(self._db, name).id
        return self._user_ids[name]


def bearer_token(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None

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

    def user_id_for(self, token: object) -> int:
        """The user id of a token; `Unauthorized` (401) when auth is on and the token is missing or unknown."""
        return self.user_id_of(self.user_name_for(token))

    def user_name_for(self, token: object) -> str:
        """The configured user name of a token, without the database; `Unauthorized` as `user_id_for`.

        A socket's token is whatever JSON its client sent: one that is not a string (a number, a list) or
        not Unicode (a lone surrogate) is unknown, not a crash of the connect handler."""
        if not self._tokens:
            return LOCAL_USER
        if token is None or token == "":
            raise Unauthorized("missing bearer token (Authorization: Bearer <token>)")
        for known, user in self._tokens.items():
            if _same(known, token):
                return user
        raise Unauthorized("unknown token")

    def knows(self, token: object) -> bool:
        """Whether the token is a configured one (no database involved)."""
        if not token:
            return False
        return any(_same(known, token) for known in self._tokens)

    def user_id_of(self, name: str) -> int:
        """A configured user's id (read from the database, or made there, the first time)."""
        if name not in self._user_ids:
            self._user_ids[name] = get_or_create_user(self._db, name).id
        return self._user_ids[name]


def _same(known: str, token: object) -> bool:
    """Whether `token` is the configured token `known`, compared in constant time."""
    if not isinstance(token, str):
        return False
    return hmac.compare_digest(known.encode(), token.encode("utf-8", "surrogatepass"))


def bearer_token(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None

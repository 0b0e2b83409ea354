"""Users configured in AUTH_TOKENS are told apart by their exact names on every database (README,
"Configuration"): MariaDB's default collation compares text ignoring case and accents, so `Anna` and `anna`,
or `René` and `Rene`, were one user there, each reading and stopping the other's conversations."""

from __future__ import annotations

import pytest

from modules.config import Settings
from modules.settings_fields import parse_auth_tokens
from modules.storage import conversations
from server.auth import Authenticator
from test.db_urls import migrated_database

NAMES = ("Anna", "anna", "René", "Rene")


@pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
def any_db(request, tmp_path):
    with migrated_database(request.param, tmp_path) as database:
        yield database


def test_names_that_differ_only_in_case_or_accents_are_users_of_their_own(any_db):
    tokens = ",".join(f"{name}:tok-{n}" for n, name in enumerate(NAMES))
    auth = Authenticator(Settings(auth_tokens=parse_auth_tokens(tokens)), any_db)
    ids = [auth.user_id_for(f"tok-{n}") for n in range(len(NAMES))]
    assert len(set(ids)) == len(NAMES), dict(zip(NAMES, ids, strict=True))

    conv, _ = conversations.create_conversation(any_db, ids[0], "Anna's", "MasterAgent")
    assert conversations.get_conversation(any_db, conv.id, ids[1]) is None  # anna cannot read Anna's
    assert conversations.list_conversations(any_db, ids[1]).conversations == []

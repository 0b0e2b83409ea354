"""A send's `client_message_id` is compared exactly on every database (docs/API.md, `POST /api/tasks`): on
MariaDB, whose default collation ignores case, a send whose id differed from an earlier one only in case got
the earlier one's answer and was never stored."""

from __future__ import annotations

import pytest

from modules.storage import client_requests
from modules.storage.users import get_or_create_user
from test.db_urls import migrated_database


@pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
def any_db(request, tmp_path):
    with migrated_database(request.param, tmp_path) as database:
        yield database


def test_ids_that_differ_only_in_case_are_sends_of_their_own(any_db):
    user = get_or_create_user(any_db, "u").id
    assert client_requests.reserve(any_db, user, "Msg-1") is None
    client_requests.complete(any_db, user, "Msg-1", {"message_id": "first"})

    assert client_requests.reserve(any_db, user, "msg-1") is None  # a send of its own, not the first's answer
    assert client_requests.reserve(any_db, user, "Msg-1") == {"message_id": "first"}

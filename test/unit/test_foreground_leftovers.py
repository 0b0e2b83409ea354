"""A foreground command's row whose delete failed (no database when its command ended), or whose insert committed
though its start failed, is deleted by the membership sweep once the database answers again
(modules/foreground_commands.py), not left to count against its user's cap (MAX_FOREGROUND_COMMANDS_PER_USER)
until the process starts its next foreground command, or for as long as it lives."""

from __future__ import annotations

from contextlib import contextmanager

import pytest

from modules.config import Settings
from modules.storage import work_counts
from modules.storage.conversations import create_conversation
from modules.storage.db import DatabaseUnavailable
from modules.storage.users import get_or_create_user
from server.app import create_app


@pytest.fixture
def server(tmp_path):
    built = create_app(Settings(database_url=f"sqlite:///{tmp_path / 'app.db'}", data_dir=tmp_path, sandbox="off",
                                max_foreground_commands_per_user=1), async_mode="threading")
    yield built
    built.runtime.db.dispose()


def test_the_membership_sweep_deletes_a_row_whose_delete_failed(server, monkeypatch):
    rt = server.runtime
    db = rt.db
    conv, master = create_conversation(db, get_or_create_user(db, "alice").id, "c")
    write = db.write
    with rt.services.foreground.running(conv.id, master.id):
        monkeypatch.setattr(db, "write", lambda *a, **kw: (_ for _ in ()).throw(OSError("no database")))
    monkeypatch.setattr(db, "write", write)  # the database is back
    assert work_counts.running_foreground_commands(db, conv.id) == (1, 1)  # the ended command still counts
    rt.membership.take_over(rt.tasks)  # the next sweep (also the one run when the database is back)
    assert work_counts.running_foreground_commands(db, conv.id) == (0, 0)


def test_a_row_whose_insert_committed_unreported_is_deleted_too(server, monkeypatch):
    rt = server.runtime
    db = rt.db
    conv, master = create_conversation(db, get_or_create_user(db, "alice").id, "c")
    write = db.write

    @contextmanager
    def committed_unreported(*args, **kwargs):
        with write(*args, **kwargs) as session:
            yield session
        raise DatabaseUnavailable("the database is unavailable: the connection was lost after COMMIT")

    monkeypatch.setattr(db, "write", committed_unreported)
    with pytest.raises(DatabaseUnavailable), rt.services.foreground.running(conv.id, master.id):
        pytest.fail("the command ran though its start failed")
    monkeypatch.setattr(db, "write", write)
    assert work_counts.running_foreground_commands(db, conv.id) == (1, 1)  # it committed after all
    rt.membership.take_over(rt.tasks)
    assert work_counts.running_foreground_commands(db, conv.id) == (0, 0)

"""Versions of a turn: the model sees only the newest version (modules/context/versions.py)."""

from __future__ import annotations

from modules.context.versions import current_versions, version_meta
from modules.context.view import HistoryRow
from modules.storage.message_meta import MessageMeta


def _rows(*specs: tuple[str, int | None]) -> list[HistoryRow]:
    return [HistoryRow(i, role, f"m{i}", replaces_from=rf) for i, (role, rf) in enumerate(specs)]


def test_without_versions_every_row_stays():
    rows = _rows(("user", None), ("assistant", None))
    assert current_versions(rows) == rows


def test_a_regenerate_drops_the_older_answer():
    rows = _rows(("user", None), ("assistant", None), ("user", 0), ("assistant", None))
    assert [r.seq for r in current_versions(rows)] == [2, 3]


def test_an_edit_of_an_earlier_turn_drops_it_and_what_followed():
    rows = _rows(("user", None), ("assistant", None), ("user", None), ("assistant", None), ("user", 2),
                 ("assistant", None), ("user", 4), ("assistant", None))
    assert [r.seq for r in current_versions(rows)] == [0, 1, 6, 7]


def test_a_version_of_a_version_names_the_first():
    assert version_meta("b", 4, MessageMeta(version_of="a")) == {"version_of": "a", "replaces_from_seq": 4}
    assert version_meta("b", 4, MessageMeta(regenerate_of="a"))["version_of"] == "a"
    assert version_meta("b", 4, MessageMeta())["version_of"] == "b"

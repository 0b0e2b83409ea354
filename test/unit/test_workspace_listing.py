"""A workspace's listing scans its folder once while nothing in it changes, and never misses a change
(server/api/workspace_listing.py)."""

from __future__ import annotations

import os
import time

import pytest

from server.api import workspace_listing
from server.api.workspace_listing import SECOND_NS, list_page, racy_ns

AN_HOUR_AGO_NS = time.time_ns() - 3600 * 10**9


@pytest.fixture
def scans(monkeypatch):
    """The scans of the folder made by this test: the names each `os.scandir` of the listing gave."""
    monkeypatch.setattr(workspace_listing, "SCANS", workspace_listing._Scans())
    made: list[str] = []
    real = os.scandir

    def counted(path):
        made.append(str(path))
        return real(path)

    monkeypatch.setattr(workspace_listing.os, "scandir", counted)
    return made


def _files(folder, count: int) -> None:
    for i in range(count):
        (folder / f"f{i:04d}").touch()


def _aged(folder, ns: int = AN_HOUR_AGO_NS) -> None:
    os.utime(folder, ns=(ns, ns))


def _all_names(folder, limit: int) -> list[str]:
    names: list[str] = []
    cursor = None
    while True:
        page = list_page(folder, cursor, limit)
        names += [f.name for f in page.files]
        if page.next_cursor is None:
            return names
        cursor = page.next_cursor


def test_paging_through_an_unchanged_folder_scans_it_once(tmp_path, scans):
    _files(tmp_path, 1000)
    (tmp_path / "sub").mkdir()
    _aged(tmp_path)
    assert _all_names(tmp_path, 30) == [f"f{i:04d}" for i in range(1000)]
    assert _all_names(tmp_path, 1000) == [f"f{i:04d}" for i in range(1000)]
    assert scans == [str(tmp_path)]


def test_a_file_added_or_removed_is_listed_at_once(tmp_path, scans):
    _files(tmp_path, 10)
    _aged(tmp_path)
    assert len(_all_names(tmp_path, 4)) == 10
    (tmp_path / "f0003").unlink()
    (tmp_path / "new").touch()
    _aged(tmp_path, AN_HOUR_AGO_NS + 10**9)  # its time moved, and not just now
    assert _all_names(tmp_path, 4) == [f"f{i:04d}" for i in range(10) if i != 3] + ["new"]
    assert len(scans) == 2


@pytest.mark.parametrize("whole_seconds", [False, True])
def test_a_folder_changed_just_before_its_scan_is_scanned_again(tmp_path, scans, whole_seconds, monkeypatch):
    """A change within the same tick (or second, where the file system keeps whole seconds) as the scan may
    leave the folder's time where it was."""
    monkeypatch.setattr(workspace_listing, "TICK_NS", 10 * SECOND_NS)  # longer than this test's slowest pace
    _files(tmp_path, 3)
    now = time.time_ns()
    changed = now // SECOND_NS * SECOND_NS if whole_seconds else now // SECOND_NS * SECOND_NS + 1
    assert racy_ns(changed) == (12 if whole_seconds else 10) * SECOND_NS
    _aged(tmp_path, changed)
    assert _all_names(tmp_path, 10) == ["f0000", "f0001", "f0002"]
    (tmp_path / "late").touch()
    _aged(tmp_path, changed)  # the folder's time did not move
    assert _all_names(tmp_path, 10) == ["f0000", "f0001", "f0002", "late"]
    assert len(scans) == 2


def test_a_missing_folder_lists_nothing(tmp_path, scans):
    assert list_page(tmp_path / "none", None, 10).files == []
    (tmp_path / "file").touch()
    assert list_page(tmp_path / "file", None, 10).files == []

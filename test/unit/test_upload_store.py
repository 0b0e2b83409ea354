"""An upload where the workspace's file system makes no nameless file (O_TMPFILE refused, as on file systems
without it): it is written under a hidden name from the start, named when whole, and a failed one leaves
nothing (server/api/workspace_files.py). The refusal is the kernel's own: the flag is replaced by
`O_DIRECTORY` alone, and opening a folder for writing fails with EISDIR."""

from __future__ import annotations

import io
import os

import pytest

from server.api import workspace_files
from server.errors import ApiError


class Source(io.BytesIO):
    """The upload's body, noting the folder's names each time a chunk is read."""

    def __init__(self, data: bytes, folder):
        super().__init__(data)
        self.folder = folder
        self.seen: list[list[str]] = []

    def read(self, size: int | None = -1) -> bytes:
        self.seen.append(sorted(p.name for p in self.folder.iterdir()))
        return super().read(size)


@pytest.fixture(params=["O_TMPFILE", "refused"])
def tmpfile(request, monkeypatch):
    if request.param == "refused":
        monkeypatch.setattr(os, "O_TMPFILE", os.O_DIRECTORY)
    return request.param


def test_an_upload_is_named_only_when_whole_and_a_failed_one_leaves_nothing(tmp_path, tmpfile):
    data = b"x" * (2 * workspace_files.COPY_CHUNK + 5)
    source = Source(data, tmp_path)
    st = workspace_files._store(source, tmp_path / "up.bin", limit=len(data), quota_mb=1)
    assert st.st_size == len(data) and (tmp_path / "up.bin").read_bytes() == data
    assert [p.name for p in tmp_path.iterdir()] == ["up.bin"]
    hidden = [name for names in source.seen[1:] for name in names if name.startswith(".upload-")]
    assert (hidden != []) == (tmpfile == "refused")  # the fallback's hidden name, never seen with O_TMPFILE
    assert "up.bin" not in source.seen[1]

    with pytest.raises(ApiError) as refused:
        workspace_files._store(io.BytesIO(data), tmp_path / "big.bin", limit=len(data) - 1, quota_mb=1)
    assert refused.value.status == 413
    with pytest.raises(ApiError) as full:  # past what the workspace's quota has left, where a poll holds it
        workspace_files._store(io.BytesIO(data), tmp_path / "over.bin", limit=len(data), quota_mb=1, room=len(data) - 1)
    assert (full.value.status, full.value.code) == (507, "workspace_full")
    (tmp_path / "folder").mkdir()
    with pytest.raises(ApiError) as folder:
        workspace_files._store(io.BytesIO(b"y"), tmp_path / "folder", limit=10, quota_mb=1)
    assert folder.value.status == 409
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder", "up.bin"]

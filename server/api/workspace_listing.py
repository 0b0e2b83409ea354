"""One page of a workspace's files, read without blocking the event loop (docs/API.md, "files").

A command can leave 200,000 files in its workspace: the folder is scanned in eventlet's thread pool,
entries are told apart by the type the directory itself records (no `lstat` per entry), and only the
page's own files are `lstat`ed. A page is the `limit` first names after `cursor`, by code point.
"""

from __future__ import annotations

import heapq
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from modules.offload import off_loop
from server.api.file_names import listable


@dataclass(frozen=True)
class ListedFile:
    name: str
    size: int
    mtime: float


@dataclass(frozen=True)
class FilePage:
    files: list[ListedFile]
    next_cursor: str | None  # the last name of this page when more follow


def _scan(folder: Path, after: str | None, limit: int) -> FilePage:
    try:
        with os.scandir(folder) as entries:
            names = [e.name for e in entries
                     if (after is None or e.name > after) and _is_regular(e) and listable(e.name)]
    except (FileNotFoundError, NotADirectoryError):
        return FilePage([], None)
    first = heapq.nsmallest(limit + 1, names)
    files = []
    for name in first[:limit]:
        try:
            st = os.lstat(folder / name)
        except OSError:
            continue  # removed since the scan
        if stat.S_ISREG(st.st_mode):
            files.append(ListedFile(name, st.st_size, st.st_mtime))
    return FilePage(files, first[limit - 1] if len(first) > limit else None)


def _is_regular(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_file(follow_symlinks=False)
    except OSError:
        return False


def list_page(folder: Path, after: str | None, limit: int) -> FilePage:
    return off_loop(_scan, folder, after, limit)

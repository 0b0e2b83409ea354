"""One page of a workspace's files, read without blocking the event loop (docs/API.md, "files").

A command can leave 200,000 files in its workspace: the folder is scanned in eventlet's thread pool,
entries are told apart by the type the directory itself records (no `lstat` per entry), and only the
page's own files are `lstat`ed. A page is the `limit` first names after `cursor`, by code point.

A scan of 200,000 names holds the interpreter's lock for a tenth of a second or more, and every request
the event loop serves meanwhile waits for that lock at each of its system calls: four scans at once on a
loaded machine made other users wait past a second. So one scan runs at a time in a process, and its sorted
names are kept while the folder's modification time says nothing was added, removed or renamed in it:
paging through the folder, or listing it again, scans it once. A folder changed just before its scan is not
kept, so no listing misses a change: a change made within the same clock tick, or the same second where the
file system keeps whole seconds (a small ext4 image's 128-byte inodes), may leave its time where it was.

A listing waits for its turn to scan in a green thread, never in a thread of the pool, and the listings of one
folder that arrive while an earlier scan of it runs share the one scan that starts next: a folder has at most one
scan running and one waiting. Otherwise a client asking sixty times at once for a folder that a command keeps
changing (so that no scan is kept) queues sixty scans, holds the pool's threads while they wait, and every other
user's listing, upload and workspace mount waits behind them for many seconds.
"""

from __future__ import annotations

import bisect
import os
import stat
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from eventlet.patcher import original

from modules.offload import off_loop
from server.api.file_names import listable

TICK_NS = 50_000_000  # more than the kernel's coarse clock tick, which file times are read from
SECOND_NS = 1_000_000_000
KEPT_NAMES = 1_000_000  # names kept over all folders (tens of MB at most), the least recently listed dropped


@dataclass(frozen=True)
class ListedFile:
    name: str
    size: int
    mtime: float


@dataclass(frozen=True)
class FilePage:
    files: list[ListedFile]
    next_cursor: str | None  # the last name of this page when more follow


@dataclass(frozen=True)
class _Scan:
    version: tuple[int, int, int]  # the folder's device, inode and modification time when it was scanned
    names: list[str]  # its listable regular files, sorted


class _Scans:
    """The kept scans; taken from the thread pool's OS threads, hence the interpreter's own locks (a green lock
    cannot be waited on there)."""

    def __init__(self) -> None:
        self._kept: OrderedDict[str, _Scan] = OrderedDict()
        self._kept_lock = original("threading").Lock()
        self._scanning = original("threading").Lock()  # one scan at a time: one thread holding the GIL long

    def names(self, folder: Path) -> list[str]:
        """`folder`'s listable regular files, sorted; FileNotFoundError or NotADirectoryError without it."""
        names = self.kept_names(folder)
        if names is not None:
            return names
        with self._scanning:
            names = self.kept_names(folder)  # scanned while this waited
            if names is not None:
                return names
            st = os.stat(folder)
            started = time.time_ns()
            with os.scandir(folder) as entries:
                names = sorted(e.name for e in entries if _is_regular(e) and listable(e.name))
            if started - st.st_mtime_ns > racy_ns(st.st_mtime_ns):
                self._keep(str(folder), _Scan(_version(st), names))
            return names

    def kept_names(self, folder: Path) -> list[str] | None:
        version = _version(os.stat(folder))
        with self._kept_lock:
            scan = self._kept.get(str(folder))
            if scan is None:
                return None
            if scan.version != version:
                del self._kept[str(folder)]
                return None
            self._kept.move_to_end(str(folder))
            return scan.names

    def _keep(self, key: str, scan: _Scan) -> None:
        with self._kept_lock:
            self._kept.pop(key, None)
            self._kept[key] = scan
            total = sum(len(kept.names) for kept in self._kept.values())
            while total > KEPT_NAMES and self._kept:
                total -= len(self._kept.popitem(last=False)[1].names)


SCANS = _Scans()


def racy_ns(mtime_ns: int) -> int:
    """How long after a folder's time a change may still leave it unmoved: a whole second's time says the file
    system may keep whole seconds only (a fine time falls on one once in a billion)."""
    return 2 * SECOND_NS + TICK_NS if mtime_ns % SECOND_NS == 0 else TICK_NS


def _version(st: os.stat_result) -> tuple[int, int, int]:
    if not stat.S_ISDIR(st.st_mode):
        raise NotADirectoryError
    return st.st_dev, st.st_ino, st.st_mtime_ns


def _page_of(folder: Path, names: list[str], after: str | None, limit: int) -> FilePage:
    """The page of `folder`'s sorted listable `names` after `after`, each file `lstat`ed (in the thread pool)."""
    start = 0 if after is None else bisect.bisect_right(names, after)
    first = names[start:start + limit + 1]
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


class _Flight:
    """One coming scan of a folder: every listing of the folder that arrives before it starts gets its names."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.scanned = False
        self.names: list[str] = []
        self.error: Exception | None = None


class _Flights:
    """The scans waiting for their turn, one per folder, waited for by green threads (run.py patches `threading`
    first), so that no thread of the pool is held while it waits."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._turn = threading.Lock()  # one scan at a time (SCANS holds that too, for its thread-pool callers)
        self._coming: dict[str, _Flight] = {}

    def names(self, folder: Path) -> list[str]:
        """`SCANS.names(folder)`, from a scan that started after this call did."""
        key = str(folder)
        while True:
            with self._lock:
                flight = self._coming.get(key)
                leads = flight is None
                if flight is None:
                    flight = self._coming[key] = _Flight()
            if leads:
                try:
                    with self._turn:
                        with self._lock:
                            del self._coming[key]  # a listing that comes from now on waits for a scan after it
                        try:
                            flight.names, flight.scanned = off_loop(SCANS.names, folder), True
                        except Exception as exc:
                            flight.error = exc
                            raise
                finally:  # also when this green thread is killed while it waits for its turn
                    with self._lock:
                        if self._coming.get(key) is flight:
                            del self._coming[key]
                    flight.done.set()
                return flight.names
            flight.done.wait()
            if flight.error is not None:
                raise flight.error
            if flight.scanned:
                return flight.names
            # its leader was interrupted (its request's green thread killed): scan again


FLIGHTS = _Flights()


def _kept(folder: Path) -> list[str] | None:
    try:
        return SCANS.kept_names(folder)
    except (FileNotFoundError, NotADirectoryError):
        return []


def list_page(folder: Path, after: str | None, limit: int) -> FilePage:
    names = off_loop(_kept, folder)
    if names is None:
        try:
            names = FLIGHTS.names(folder)
        except (FileNotFoundError, NotADirectoryError):
            names = []
    return off_loop(_page_of, folder, names, after, limit)

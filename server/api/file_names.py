"""The names a workspace file may have through the API (docs/API.md, "files").

A name is one path component, stored in Unicode NFC, without control, format (bidi overrides, zero-width
characters) or line/paragraph separators: a right-to-left override can make `txt.exe` read as `exe.txt`. A
name a command created that breaks these rules is left out of listings, so every listed name downloads.
"""

from __future__ import annotations

import unicodedata

from server.errors import ApiError

MAX_NAME_BYTES = 255
REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def name_problem(name: str) -> str | None:
    """Why `name` (already NFC) cannot be a workspace file's name, or None."""
    if not name or name != name.strip() or name in (".", "..") or ".." in name or "/" in name or "\\" in name:
        return "the file name must be one path component without `/`, `\\` or `..`, and not blank"
    if not (name.isascii() and name.isprintable()) and any(unicodedata.category(c) in REFUSED_CATEGORIES
                                                           for c in name):  # printable ASCII: none refused
        return "the file name must not hold NUL, control, bidirectional or other invisible format characters"
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        return "the file name is not valid Unicode"
    if size > MAX_NAME_BYTES:
        return f"the file name is longer than {MAX_NAME_BYTES} bytes"
    return None


def checked_name(name: str | None) -> str:
    """The name as stored (NFC), or 400 `invalid_filename` saying why."""
    normal = unicodedata.normalize("NFC", name or "")
    problem = name_problem(normal)
    if problem:
        raise ApiError(400, "invalid_filename", problem)
    return normal


def listable(name: str) -> bool:
    """Whether a name found on disk can be downloaded by that same name."""
    return name_problem(name) is None and unicodedata.normalize("NFC", name) == name

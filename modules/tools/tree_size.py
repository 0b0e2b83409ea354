"""The space a folder's files take (README, "Command sandbox": the workspace quota's poll)."""

from __future__ import annotations

import os
from pathlib import Path


def tree_bytes(root: Path) -> int:
    """The space the files under `root` take (allocated blocks; links not followed)."""
    total = 0
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    total += st.st_blocks * 512
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(Path(entry.path))
        except OSError:
            continue
    return total

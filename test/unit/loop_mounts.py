"""What a test of loop-mounted workspaces looks at (shared by test_workspace_images.py and test_stale_holders.py):
the mounts this process sees under a folder, and the loop devices whose image lies under it."""

from __future__ import annotations

import subprocess
from pathlib import Path


def mounts_under(folder: Path) -> list[str]:
    with open("/proc/self/mountinfo") as info:
        return [line.split()[4] for line in info if line.split()[4].startswith(str(folder))]


def loops_of(folder: Path) -> list[str]:
    """The loop devices whose image lies under `folder`."""
    found = []
    for backing in Path("/sys/block").glob("loop*/loop/backing_file"):
        try:
            if backing.read_text().startswith(str(folder)):
                found.append(backing.parent.parent.name)
        except OSError:
            continue
    return found


def unmount_all_under(folder: Path) -> None:
    """Whatever a test left mounted under `folder`, unmounted (lazily)."""
    for point in reversed(mounts_under(folder)):
        subprocess.run(["umount", "-l", point], check=False)

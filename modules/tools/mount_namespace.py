"""The server's own mount namespace (README, "Command sandbox": the workspace quota).

A root server mounts each conversation's workspace image and a tmpfs for the sandbox's /etc. It does so in
a mount namespace of its own, made at start (`run.py`) before any thread exists, with every mount private:
nothing it mounts shows on the host, and everything it mounted goes when its last process ends, whether it
exits, is stopped or is killed (the loop devices under them are cleared then too: they are attached with
autoclear). The namespace belongs to the calling thread only, so it must be entered while the process has
one thread.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

CLONE_NEWNS = 0x00020000
MS_NOSUID, MS_NODEV = 0x2, 0x4
MS_REC, MS_PRIVATE = 0x4000, 0x40000
MNT_DETACH = 0x2

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
_state: dict[str, str | None] = {"problem": "run.py did not make one"}  # why the process has none, or None


def _checked(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def mount(source: str, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    _checked(_libc.mount(source.encode(), target.encode(), fstype.encode() if fstype else None,
                         ctypes.c_ulong(flags), data.encode() if data else None), f"mount {target}")


def unmount(target: str) -> None:
    """Detach the mount at `target` now; the kernel lets it go once nothing uses it."""
    _checked(_libc.umount2(target.encode(), MNT_DETACH), f"umount {target}")


def enter_private() -> str | None:
    """Move this process into a mount namespace of its own with every mount private; why it could not, or
    None. Call it once, before any thread is started."""
    if _state["problem"] is None:
        return None
    if os.geteuid() != 0:
        problem: str | None = "the server does not run as root"
    elif len(os.listdir("/proc/self/task")) > 1:
        problem = "the process already has threads"
    else:
        try:
            _checked(_libc.unshare(CLONE_NEWNS), "unshare")
            mount("none", "/", None, MS_REC | MS_PRIVATE, None)
            problem = None
        except OSError as exc:
            problem = str(exc)
    _state["problem"] = problem
    return problem


def problem() -> str | None:
    """Why this process has no mount namespace of its own, or None when it has."""
    return _state["problem"]

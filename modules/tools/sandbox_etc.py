"""The sandbox's /etc: a copy of the parts programs need, without service configs or credentials (README,
"Command sandbox").

A sandbox's /proc/self/mountinfo shows each bind mount's source as its path within its filesystem, so the
copy is the whole of a tmpfs of its own where the server has a mount namespace of its own (its line shows
`/`), else it lives on a memory filesystem (/dev/shm) where there is one (its line shows
`/chat-sandbox-<uid>/etc-<pid>`): a copy in the data directory would show the host's data path to every
command."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from modules.tools import mount_namespace

# The parts of /etc that programs need; the rest (service configs, credentials) stays out of sight.
ETC_ALLOW = (
    "alternatives", "bash.bashrc", "ca-certificates", "ca-certificates.conf", "debian_version", "environment",
    "gai.conf", "group", "host.conf", "hostname", "hosts", "inputrc", "ld.so.cache", "ld.so.conf", "ld.so.conf.d",
    "locale.alias", "locale.conf", "localtime", "magic", "mime.types", "nsswitch.conf", "os-release", "passwd",
    "profile", "protocols", "python3", "python3.11", "python3.12", "python3.13", "resolv.conf", "services",
    "ssl/certs", "ssl/openssl.cnf", "terminfo", "timezone", "gitconfig", "vim", "wgetrc",
)


SHARED_MEMORY = Path("/dev/shm")
ETC_TMPFS = "size=64m,mode=755"


def etc_root(state_dir: Path) -> Path:
    """Where the copies of /etc go: a folder of this user's on /dev/shm if it is a filesystem of its own and
    writable, else the server's state folder."""
    if os.path.ismount(SHARED_MEMORY) and os.access(SHARED_MEMORY, os.W_OK):
        return SHARED_MEMORY / f"chat-sandbox-{os.geteuid()}"
    return state_dir


def build_etc(state_dir: Path, *, network: bool) -> Path:
    """A copy of the allowed parts of /etc, made once per server process: one bind mount per command
    instead of one per file (each mount costs a command about a quarter of a millisecond)."""
    if mount_namespace.problem() is None:  # mounted in the server's own namespace: it goes with the server
        etc = state_dir / "etc"
        etc.mkdir(parents=True, exist_ok=True)
        mount_namespace.mount("tmpfs", str(etc), "tmpfs", mount_namespace.MS_NOSUID | mount_namespace.MS_NODEV,
                              ETC_TMPFS)
    else:
        root = etc_root(state_dir)
        root.mkdir(parents=True, exist_ok=True)
        for stale in root.glob("etc-*"):
            pid = stale.name.removeprefix("etc-")
            if not pid.isdigit() or not Path(f"/proc/{pid}").exists():
                shutil.rmtree(stale, ignore_errors=True)
        etc = root / f"etc-{os.getpid()}"
        shutil.rmtree(etc, ignore_errors=True)
        etc.mkdir(mode=0o755)
    for name in ETC_ALLOW:
        source, target = Path("/etc") / name, etc / name
        target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        if source.is_dir() and not source.is_symlink():
            shutil.copytree(source, target, symlinks=True)
        elif source.exists() or source.is_symlink():
            shutil.copy2(source, target, follow_symlinks=False)
    if network:  # slirp4netns answers DNS at 10.0.2.3
        (etc / "resolv.conf").unlink(missing_ok=True)
        (etc / "resolv.conf").write_text("nameserver 10.0.2.3\n")
    for path in [etc, *etc.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() else 0o644)
    return etc

"""The seccomp filter of every sandboxed command, compiled by libseccomp (README, "Command sandbox").

libseccomp (the library Docker, Podman and systemd build their filters with) turns the rules into the
classic BPF program that bwrap loads (`--seccomp FD`) just before it runs the command. The rules follow
the usual container profiles: no new user namespace (`unshare`/`clone` with CLONE_NEWUSER; `clone3`,
whose flags a filter cannot read, answers ENOSYS so that libc falls back to `clone`), and none of the calls
that containers deny as escape or kernel-attack surface (keyrings, BPF, perf, userfaultfd, kernel modules,
kexec, handles to host files, namespaces of others, terminal injection). Everything else is allowed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import termios
from pathlib import Path

SCMP_ACT_ALLOW = 0x7FFF0000
CLONE_NEWUSER = 0x10000000
SCMP_CMP_MASKED_EQ = 7
DENIED = (
    "add_key", "bpf", "delete_module", "finit_module", "fsconfig", "fsmount", "fsopen", "fspick", "init_module",
    "ioperm", "iopl", "kcmp", "kexec_file_load", "kexec_load", "keyctl", "lookup_dcookie", "mount",
    "mount_setattr", "move_mount", "name_to_handle_at", "nfsservctl", "open_by_handle_at", "open_tree",
    "perf_event_open", "pivot_root", "process_vm_readv", "process_vm_writev", "quotactl", "reboot",
    "request_key", "setns", "swapoff", "swapon", "syslog", "umount2", "userfaultfd", "vhangup",
)


class SeccompUnavailable(RuntimeError):
    """libseccomp cannot be loaded or refused a rule; the message says which."""


class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                ("datum_b", ctypes.c_uint64)]


def _errno_action(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)  # SCMP_ACT_ERRNO(code)


def _library() -> ctypes.CDLL:
    name = ctypes.util.find_library("seccomp")
    if not name:
        raise SeccompUnavailable("libseccomp is not installed (apt-get install libseccomp2)")
    lib = ctypes.CDLL(name, use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                           ctypes.POINTER(_ArgCmp)]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    return lib


def build_filter(target: Path) -> Path:
    """Write the filter's BPF program to `target` (read by bwrap through a descriptor per command)."""
    lib = _library()
    ctx = lib.seccomp_init(SCMP_ACT_ALLOW)
    if not ctx:
        raise SeccompUnavailable("seccomp_init failed")
    try:
        def rule(action: int, name: str, *cmps: _ArgCmp) -> None:
            number = lib.seccomp_syscall_resolve_name(name.encode())
            if number < 0:
                return  # not a call of this architecture
            array = (_ArgCmp * len(cmps))(*cmps) if cmps else None
            rc = lib.seccomp_rule_add_array(ctx, action, number, len(cmps), array)
            if rc < 0:
                raise SeccompUnavailable(f"libseccomp refused the rule for {name}: {os.strerror(-rc)}")

        eperm = _errno_action(errno.EPERM)
        for name in DENIED:
            rule(eperm, name)
        new_user = _ArgCmp(0, SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER)
        rule(eperm, "unshare", new_user)
        rule(eperm, "clone", new_user)
        rule(_errno_action(errno.ENOSYS), "clone3")
        rule(eperm, "ioctl", _ArgCmp(1, SCMP_CMP_MASKED_EQ, 0xFFFFFFFF, termios.TIOCSTI))
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "wb") as sink:
            rc = lib.seccomp_export_bpf(ctx, sink.fileno())
        if rc < 0:
            raise SeccompUnavailable(f"seccomp_export_bpf failed: {os.strerror(-rc)}")
        return target
    finally:
        lib.seccomp_release(ctx)

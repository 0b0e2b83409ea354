"""A sandbox with a network of its own (`SANDBOX_NETWORK=on`, README "Command sandbox"): slirp4netns gives
the sandbox's network namespace a user-mode stack that cannot reach the host's loopback (where the database,
Redis and this server listen), and the link-local range (169.254.169.254, the clouds' metadata service) is
made unreachable from outside before the command starts."""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import time
from collections.abc import Callable

from modules.tools.launched import Launched, kill_group

NETWORK_READY_TIMEOUT_S = 5.0
LINK_LOCAL = "169.254.0.0/16"  # where clouds answer metadata requests (169.254.169.254)
GATE = 'printf x >&0; read -r _; exec </dev/null; exec "$@"'

# starts bwrap with these extra options, these descriptors passed, this standard input, around this command
StartBwrap = Callable[[list[str], tuple[int, ...], int, list[str]], subprocess.Popen[bytes]]


def spawn_networked(start: StartBwrap, inner: list[str], *, slirp: str, privileged: bool) -> Launched:
    """slirp4netns may only configure the namespace once bwrap has finished setting it up, so the command's
    first act is to say so on its standard input (a socket pair), and its second to wait there for the word
    that the network is up."""
    info_r, info_w = os.pipe()
    ours, theirs = socket.socketpair()
    os.set_blocking(theirs.fileno(), True)  # eventlet makes sockets non-blocking; the gate's read must wait
    try:
        proc = start(["--unshare-net", "--info-fd", str(info_w)], (info_w,), theirs.fileno(),
                     ["/bin/sh", "-c", GATE, "sh", *inner])
    finally:
        os.close(info_w)
        theirs.close()
    launched = Launched(proc)
    try:
        child_pid = _read_child_pid(info_r)
        if not _wait_readable(ours.fileno()) or not os.read(ours.fileno(), 1):
            raise RuntimeError("the sandbox did not start")
        ready_r, ready_w = os.pipe()
        exit_r, exit_w = os.pipe()
        launched.fds.append(exit_w)
        helper = subprocess.Popen(
            [slirp, "--configure", "--mtu=65520", "--disable-host-loopback",
             "--ready-fd", str(ready_w), "--exit-fd", str(exit_r), str(child_pid), "tap0"],
            pass_fds=(ready_w, exit_r), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        os.close(ready_w)
        os.close(exit_r)
        launched.helpers.append(helper)
        ready = _wait_readable(ready_r) and os.read(ready_r, 1)
        os.close(ready_r)
        if not ready:
            raise RuntimeError("the sandbox's network did not come up")
        _block_link_local(child_pid, privileged)
        os.write(ours.fileno(), b"go\n")
    except BaseException:
        kill_group(proc.pid)
        proc.wait()
        launched.release()
        raise
    finally:
        os.close(info_r)
        ours.close()
    return launched


def _block_link_local(child_pid: int, privileged: bool) -> None:
    """Link-local addresses made unreachable in the sandbox's network namespace: entered from outside, so the
    sandbox needs no capability for it."""
    enter = ["nsenter", "-t", str(child_pid), "-n"] if privileged else \
        ["nsenter", "-t", str(child_pid), "-U", "-n", "--preserve-credentials"]
    done = subprocess.run([*enter, "ip", "route", "add", "unreachable", LINK_LOCAL], capture_output=True,
                          timeout=NETWORK_READY_TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"could not cut the sandbox off from {LINK_LOCAL}: "
                           f"{done.stderr.decode(errors='replace').strip()[:200]}")


def _wait_readable(fd: int) -> bool:
    return bool(select.select([fd], [], [], NETWORK_READY_TIMEOUT_S)[0])


def _read_child_pid(info_r: int) -> int:
    """bwrap writes `{"child-pid": N}` to its info fd once the namespaces exist."""
    data = b""
    deadline = time.monotonic() + NETWORK_READY_TIMEOUT_S
    while b"}" not in data:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([info_r], [], [], left)[0]:
            raise RuntimeError("bwrap did not report its sandbox")
        chunk = os.read(info_r, 4096)
        if not chunk:
            raise RuntimeError("bwrap exited before its sandbox was up")
        data += chunk
    return int(json.loads(data[:data.index(b"}") + 1])["child-pid"])

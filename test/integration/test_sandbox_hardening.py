"""Inside the sandbox (README, "Command sandbox"): no nested user namespace, the seccomp filter's escape
calls refused, the metadata address unreachable with the network on, no host path in what the command can
read of its processes and mounts; the start-up line says what holds."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from test.integration.sandbox_helpers import run_in_sandbox

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

PROBE = ("unshare -Ur id; echo unshare=$?; unshare -U true; echo unshare_u=$?; "
         "python3 -c 'import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); "
         "print(\"keyctl\", libc.syscall(250, 0, 0, 0, 0, 0), ctypes.get_errno()); "
         "print(\"bpf\", libc.syscall(321, 0, 0, 0), ctypes.get_errno()); "
         "print(\"threads\", __import__(\"concurrent.futures\").futures.ThreadPoolExecutor(2).submit(os.getpid)"
         ".result() == os.getpid())'")


def test_no_nested_user_namespace_and_no_escape_calls(make_server, llm):
    server = make_server(env={"AUTH_TOKENS": "alice:tok-a", "COMMAND_TIMEOUT_S": "20"})
    assert "seccomp filter" in server.log_text() and "NO seccomp" not in server.log_text()
    result = run_in_sandbox(server, llm, PROBE, token="tok-a")
    out = result["output"]
    assert "unshare=1" in out and "unshare_u=1" in out, out  # `unshare -Ur` had given root in a new namespace
    assert "uid=0" not in out
    assert "keyctl -1 1" in out and "bpf -1 1" in out, out  # EPERM
    assert "threads True" in out, out  # clone3 answers ENOSYS: threads start through clone


@pytest.mark.skipif(shutil.which("slirp4netns") is None, reason="slirp4netns is not installed")
def test_with_network_on_the_metadata_address_is_unreachable(make_server, llm):
    server = make_server(env={"AUTH_TOKENS": "alice:tok-a", "SANDBOX_NETWORK": "on", "COMMAND_TIMEOUT_S": "20"})
    assert "169.254.0.0/16 unreachable" in server.log_text()
    probe = ("ip route get 169.254.169.254; python3 -c \"import socket; s = socket.socket(); s.settimeout(3); "
             "print('metadata', s.connect_ex(('169.254.169.254', 80)))\"")
    result = run_in_sandbox(server, llm, probe, token="tok-a")
    assert "No route to host" in result["output"], result["output"]
    assert "metadata 113" in result["output"] or "metadata 101" in result["output"], result["output"]


LOOK = ("for f in /proc/[0-9]*/cmdline /proc/[0-9]*/environ; do echo \"== $f\"; tr '\\0' ' ' < $f; echo; done "
        "2>/dev/null; echo '== mountinfo'; cat /proc/self/mountinfo; readlink /proc/self/cwd")


def _host_paths_seen(server, llm, conversation_id: str | None = None) -> tuple[str, str]:
    """What a command sees of its own processes (cmdline, environ) and of its mounts (mountinfo)."""
    result = run_in_sandbox(server, llm, LOOK, token="tok-a", conversation_id=conversation_id)
    assert "output" in result, result
    out = result["output"]
    processes, mounts = out.split("== mountinfo", 1)
    assert "/proc/1/cmdline" in processes and "bwrap" in processes, out
    return processes, mounts


@pytest.mark.skipif(os.geteuid() != 0, reason="a workspace of its own file system needs a root server")
def test_with_each_workspace_its_own_file_system_no_mount_names_a_host_path_or_a_workspace(make_server, llm,
                                                                                           tmp_path):
    """Every line of mountinfo: the workspace's and the /etc copy's show `/` (file systems of their own),
    the system's its own path, /tmp and /proc their roots; no host path, no conversation's id."""
    server = make_server(env={"AUTH_TOKENS": "alice:tok-a", "COMMAND_TIMEOUT_S": "20", "WORKSPACE_QUOTA": "loop"})
    other = run_in_sandbox(server, llm, "echo other > o.txt", token="tok-a")["conversation_id"]
    mine = server.post("/api/conversations", {"title": "mine"}, token="tok-a").json()["conversation_id"]
    processes, mounts = _host_paths_seen(server, llm, mine)
    hidden = [str(ROOT), str(server.data_dir), str(tmp_path), "/dev/shm", "chat-sandbox", other, mine]
    assert [p for p in hidden if p in processes + mounts] == [], mounts
    fields = [line.split() for line in mounts.splitlines() if line.split() and line.split()[0].isdigit()]
    roots = {f[4]: f[3] for f in fields}  # mount point: the mounted folder's path within its file system
    assert roots["/workspace"] == "/" and roots["/etc"] == "/" and roots["/tmp"] == "/", mounts
    # the rest: the sandbox's own root, or a folder that has the same path (or name, for /proc's and /dev's
    # parts) inside the sandbox as on its file system
    assert [(point, root) for point, root in roots.items()
            if root not in ("/", "/newroot") and not point.endswith(root)] == [], mounts


def test_with_the_poll_no_host_path_but_the_workspaces_own(make_server, llm, tmp_path):
    server = make_server(env={"AUTH_TOKENS": "alice:tok-a", "COMMAND_TIMEOUT_S": "20", "WORKSPACE_QUOTA": "poll"})
    processes, mounts = _host_paths_seen(server, llm)
    hidden = [str(ROOT), str(server.data_dir), str(tmp_path)]
    assert [p for p in hidden if p in processes] == [], processes  # bwrap's own arguments came by descriptor
    assert str(ROOT) not in mounts, mounts
    # a bind mount shows its source as its path within its filesystem: on the data directory's disk, the
    # workspace's own line is the one that names it (put DATA_DIR on a filesystem of its own, below)
    others = [line for line in mounts.splitlines() if " /workspace " not in line]
    assert [line for line in others if any(p in line for p in hidden)] == [], mounts


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a filesystem for the data directory needs root")
def test_with_the_poll_and_the_data_directory_on_a_filesystem_of_its_own_no_host_path_shows_at_all(
        make_server, llm, tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(disk)], check=True)
    try:
        server = make_server(data_dir=disk / "data", env={"AUTH_TOKENS": "alice:tok-a", "COMMAND_TIMEOUT_S": "20",
                                                          "DATA_DISK_RESERVE_MB": "1", "WORKSPACE_QUOTA": "poll"})
        processes, mounts = _host_paths_seen(server, llm)
        seen = processes + mounts
        assert [p for p in (str(ROOT), str(tmp_path)) if p in seen] == [], seen
        server.stop()
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)

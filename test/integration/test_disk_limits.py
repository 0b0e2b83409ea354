"""Disk limits on a real small filesystem (README, "Command sandbox": WORKSPACE_MAX_MB, DATA_DISK_RESERVE_MB):
the data directory is a 64 MB tmpfs the test mounts; a command past its workspace's quota, or one that eats
into the data disk's reserve, is stopped and the next refused, while the other user's sends are stored."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from test.conftest import TWO_USERS
from test.integration.sandbox_helpers import run_in_sandbox

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mount") is None,
                                reason="mounting a small filesystem needs root")

WRITER = ("i=0; while [ $i -lt {mb} ]; do head -c 1048576 /dev/zero > {name}-$i; i=$((i+1)); sleep 0.05; done; "
          "echo wrote")


@pytest.fixture
def small_disk(tmp_path):
    mount = tmp_path / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mount)], check=True)
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_workspace_and_a_low_disk_stop_commands_and_lose_nothing_of_others(make_server, llm, small_disk):
    server = make_server(data_dir=small_disk / "data", env={
        "AUTH_TOKENS": TWO_USERS, "WORKSPACE_MAX_MB": "8", "DATA_DISK_RESERVE_MB": "24", "COMMAND_TIMEOUT_S": "60"})
    result = run_in_sandbox(server, llm, WRITER.format(mb=30, name="quota"), token="tok-alice")
    assert result["success"] is False and "WORKSPACE_MAX_MB" in result["error"], result
    assert "wrote" not in result["output"]
    again = run_in_sandbox(server, llm, "echo more", token="tok-alice", conversation_id=result["conversation_id"])
    assert again["success"] is False and "WORKSPACE_MAX_MB" in again["error"], again

    # bob fills the disk down to its reserve through several conversations' quotas
    stopped = None
    for _ in range(8):
        result = run_in_sandbox(server, llm, WRITER.format(mb=7, name="fill"), token="tok-bob")
        if not result["success"]:
            stopped = result
            break
    assert stopped is not None and "DATA_DISK_RESERVE_MB" in stopped["error"], stopped
    assert shutil.disk_usage(small_disk).free > 8 * 2**20  # the reserve held
    res = server.post("/api/tasks", {"message": "still here"}, token="tok-alice")
    assert res.status_code == 202, res.text  # the server's own writes still succeed
    up = server.request("POST", "/api/conversations/" + res.json()["conversation_id"] + "/files",
                        files={"file": ("x.bin", b"x" * 1000)}, token="tok-alice")
    assert (up.status_code, up.json()["code"]) == (507, "insufficient_storage")

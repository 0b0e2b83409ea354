"""Disk limits on a real small filesystem (README, "Command sandbox": WORKSPACE_MAX_MB, WORKSPACE_QUOTA,
DATA_DISK_RESERVE_MB): the data directory is a 64 MB tmpfs the test mounts; a command past its workspace's
quota, or one that eats into the data disk's reserve, is stopped or refused, while the other user's sends are
stored. Both ways of holding the quota: the kernel (each workspace a loop-mounted image) and the poll."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from modules.tools.tree_size import tree_bytes
from test.conftest import TWO_USERS
from test.integration.sandbox_helpers import run_in_sandbox

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mount") is None,
                                reason="mounting a small filesystem needs root")

WRITER = ("i=0; while [ $i -lt {mb} ]; do head -c 1048576 /dev/zero > {name}-$i; i=$((i+1)); sleep 0.05; done; "
          "echo wrote")
# 64 kB files as fast as Python writes them: far more than 8 MB in one of the poll's quarter seconds
FAST_SMALL_FILES = ("python3 -c \"import os\nfor i in range(4000): open(f'f{i}', 'wb').write(b'x' * 65536)\n"
                    "print('wrote all')\"")


@pytest.fixture
def small_disk(tmp_path):
    mount = tmp_path / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mount)], check=True)
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.mark.parametrize("quota", ["loop", "poll"])
def test_a_full_workspace_and_a_low_disk_stop_commands_and_lose_nothing_of_others(make_server, llm, small_disk,
                                                                                 quota):
    server = make_server(data_dir=small_disk / "data", env={
        "AUTH_TOKENS": TWO_USERS, "WORKSPACE_MAX_MB": "8", "DATA_DISK_RESERVE_MB": "24", "COMMAND_TIMEOUT_S": "60",
        "WORKSPACE_QUOTA": quota})
    by_kernel = "by the kernel" if quota == "loop" else "by a poll"
    assert f"workspace quota 8 MB {by_kernel}" in server.log_text()
    result = run_in_sandbox(server, llm, WRITER.format(mb=30, name="quota"), token="tok-alice")
    assert result["success"] is False and "WORKSPACE_MAX_MB" in result["error"], result
    if quota == "loop":  # the kernel refused the writes past it; the command ran to its end
        assert "No space left on device" in result["output"], result
    else:  # the poll stopped the command
        assert "wrote" not in result["output"]
    assert tree_bytes(server.workspace(result["conversation_id"])) <= (8 if quota == "loop" else 12) * 2**20
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


def test_a_fast_writer_of_many_small_files_cannot_pass_the_quota(make_server, llm, small_disk):
    """The poll reads the size four times a second, and a command writes far more than the quota in that
    time (under the poll this one fills the whole data disk, the server's database with it); with each
    workspace its own file system, the kernel refuses the first write past it."""
    server = make_server(data_dir=small_disk / "data", env={
        "AUTH_TOKENS": TWO_USERS, "WORKSPACE_MAX_MB": "8", "DATA_DISK_RESERVE_MB": "4", "COMMAND_TIMEOUT_S": "60"})
    result = run_in_sandbox(server, llm, FAST_SMALL_FILES, token="tok-alice")
    assert result["success"] is False and "WORKSPACE_MAX_MB" in result["error"], result
    assert "No space left on device" in result["output"], result
    cid = result["conversation_id"]
    workspace = server.workspace(cid)
    assert tree_bytes(workspace) <= 8 * 2**20

    # an upload that does not fit answers 507 and leaves nothing; after a deletion it fits and is stored
    up = server.request("POST", f"/api/conversations/{cid}/files", files={"file": ("big.bin", b"x" * 2**20)},
                        token="tok-alice")
    assert (up.status_code, up.json()["code"]) == (507, "workspace_full"), up.text
    assert [name for name in os.listdir(workspace) if not name.startswith("f")] == []
    for name in os.listdir(workspace)[:40]:
        os.unlink(workspace / name)
    up = server.request("POST", f"/api/conversations/{cid}/files", files={"file": ("big.bin", b"x" * 2**20)},
                        token="tok-alice")
    assert up.status_code == 201, up.text

"""A real server's workspaces as file systems of their own (README, "Command sandbox": WORKSPACE_QUOTA): the
start-up line says how the quota holds; a server killed (SIGKILL) with a command running leaves no mount on
the host and no loop device attached, and the next server finds the files; two processes of a cluster on one
DATA_DIR share one loop device per image; where images cannot be mounted, `auto` falls back to the poll and
`loop` refuses to start."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from modules.statuses import FINAL_TASK_STATUSES
from test.conftest import ROOT, free_port, wait_until
from test.db_urls import fresh_database
from test.integration.sandbox_helpers import run_in_sandbox

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("bwrap") is None
                                or not os.path.exists("/dev/loop-control"),
                                reason="loop-mounted workspaces need a root server and bubblewrap")


def _loops_under(folder: Path) -> list[str]:
    found = []
    for backing in Path("/sys/block").glob("loop*/loop/backing_file"):
        try:
            if str(folder) in backing.read_text():
                found.append(backing.parent.parent.name)
        except OSError:
            continue
    return found


def _tasks(server, cid: str) -> list[dict]:
    return server.get(f"/api/tasks?conversation_id={cid}", token="tok-a").json()["data"]


def _host_mounts_under(folder: Path) -> list[str]:
    with open("/proc/self/mountinfo") as info:
        return [line.split()[4] for line in info if str(folder) in line.split()[4]]


def test_a_killed_server_leaves_no_mount_and_no_loop_device_and_the_next_finds_the_files(make_server, llm):
    server = make_server(env={"AUTH_TOKENS": "alice:tok-a", "COMMAND_TIMEOUT_S": "30", "WORKSPACE_MAX_MB": "64"})
    assert "workspace quota 64 MB by the kernel" in server.log_text()
    made = run_in_sandbox(server, llm, "echo kept > kept.txt && df -k /workspace | tail -1", token="tok-a")
    assert made["success"] and made["output"].split()[1].isdigit(), made
    assert 60_000 < int(made["output"].split()[1]) <= 65_536  # its own file system, of the quota's size
    cid = made["conversation_id"]
    run_in_sandbox(server, llm, "sleep 25", token="tok-a", conversation_id=cid, run_in_background=True)
    wait_until(lambda: server.get(f"/api/background_commands?conversation_id={cid}", token="tok-a")
               .json()["data"], 10, what="the background command")
    assert len(_loops_under(server.data_dir)) == 1 and _host_mounts_under(server.data_dir) == []

    before = len(_tasks(server, cid))

    server.stop(signal.SIGKILL)
    wait_until(lambda: _loops_under(server.data_dir) == [], 15, what="the loop device cleared")
    assert _host_mounts_under(server.data_dir) == []
    server.start()
    # The command the killed server lost is reported after the restart, and its notice starts a turn of its own:
    # that turn ends first, so the next turn's model requests are the test's alone.
    wait_until(lambda: len(tasks := _tasks(server, cid)) > before
               and all(t["status"] in FINAL_TASK_STATUSES for t in tasks), 40, what="the lost command's notice turn")
    again = run_in_sandbox(server, llm, "cat kept.txt", token="tok-a", conversation_id=cid)
    assert again["success"] and again["output"].strip() == "kept", again


def test_two_processes_on_one_data_directory_share_one_loop_device_per_workspace(make_server, llm, tmp_path,
                                                                              redis_url):
    with fresh_database("postgresql", tmp_path) as url:
        shared = tmp_path / "shared"
        a = make_server(data_dir=shared, database_url=url, env={"REDIS_URL": redis_url})
        b = make_server(data_dir=shared, database_url=url, env={"REDIS_URL": redis_url})
        cid = a.post("/api/conversations", {"title": "shared"}).json()["conversation_id"]
        for server, name in ((a, "from-a.txt"), (b, "from-b.txt")):  # each process mounts the workspace
            res = server.request("POST", f"/api/conversations/{cid}/files", files={"file": (name, name.encode())})
            assert res.status_code == 201, res.text
        for server in (a, b):
            names = [f["name"] for f in server.get(f"/api/conversations/{cid}/files").json()["data"]]
            assert names == ["from-a.txt", "from-b.txt"]
            assert sorted(p.name for p in server.workspace(cid).iterdir()) == ["from-a.txt", "from-b.txt"]
        assert len(_loops_under(shared)) == 1  # two devices on one image would corrupt it
        done = run_in_sandbox(b, llm, "cat from-a.txt; echo; cat from-b.txt", token=None, conversation_id=cid)
        assert done["success"] and done["output"].split() == ["from-a.txt", "from-b.txt"], done
        a.stop()
        b.stop()
    assert _loops_under(shared) == []


def _start(data_dir: Path, quota: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATA_DIR": str(data_dir), "WORKSPACE_QUOTA": quota, "PATH": "/usr/bin:/bin",
           "PORT": str(free_port())}  # no /usr/sbin: no mkfs.ext4
    return subprocess.run([sys.executable, "run.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=30)


def test_without_mkfs_auto_falls_back_to_the_poll_and_loop_refuses_to_start(make_server, llm, tmp_path):
    refused = _start(tmp_path / "loop", "loop")
    assert refused.returncode == 2, refused.stderr[-2000:]
    assert "WORKSPACE_QUOTA=loop" in refused.stderr and "mkfs.ext4 is not installed" in refused.stderr

    server = make_server(env={"PATH": "/usr/bin:/bin", "WORKSPACE_QUOTA": "auto"})
    assert "by a poll every 0.25 s (no kernel quota: mkfs.ext4 is not installed" in server.log_text()

"""What a server that is gone left holding its workspaces' loop devices is removed when the next one starts
(modules/tools/stale_holders.py, README "Command sandbox"), and nothing of a live server is touched: real loop
devices, real processes."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from modules.tools.workspace_images import WorkspaceImages
from test.conftest import wait_until
from test.unit.loop_mounts import loops_of, unmount_all_under

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists("/dev/loop-control")
                                or shutil.which("mkfs.ext4") is None, reason="loop mounts need root")

# A server in short: its own mount namespace, recorded at its start (probe), one workspace mounted, and a child
# in its namespace that does not die with it (no parent-death signal, a session of its own).
SERVER = textwrap.dedent("""
    import subprocess, sys
    from pathlib import Path
    from modules.tools import mount_namespace
    from modules.tools.workspace_images import WorkspaceImages
    assert mount_namespace.enter_private() is None
    images = WorkspaceImages(Path(sys.argv[1]), 8 * 2**20)
    assert images.probe() is None
    images.open(Path(sys.argv[2]), create=True)
    child = subprocess.Popen(["sleep", "600"], start_new_session=True)
    print(child.pid, flush=True)
    sys.stdin.read()
""")


def _server(data: Path, name: str) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(data / "images"), str(data / "workspaces" / name)],
                            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline())


def _record(pid: int) -> str:
    return f"{pid}-{Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()[19]}"


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture
def data(tmp_path):
    yield tmp_path
    unmount_all_under(tmp_path)


def test_the_next_start_kills_what_a_killed_server_left_holding_its_device_and_spares_a_live_one(data):
    live, live_child = _server(data, "live")
    dead, leftover = _server(data, "dead")
    try:
        dead.send_signal(signal.SIGKILL)
        dead.wait(10)
        assert _alive(leftover) and len(loops_of(data)) == 2  # the leftover keeps the dead one's mount
        images = WorkspaceImages(data / "images", 8 * 2**20)
        assert images.probe() is None  # the next start
        assert images.stale_removed.processes == 1
        wait_until(lambda: not _alive(leftover), 10, what="the leftover killed")
        wait_until(lambda: len(loops_of(data)) == 1, 10, what="the dead server's loop device detached")
        assert live.poll() is None and _alive(live_child)  # the live server and its child are untouched
        records = {p.name for p in (data / "images" / "servers").iterdir()}
        assert records == {_record(live.pid), _record(os.getpid())}  # the dead one's record is gone
    finally:
        for pid in (live_child, leftover):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        live.kill()
        live.wait(10)

"""Each workspace its own loop-mounted file system (modules/tools/workspace_images.py, README "Command
sandbox"), on real loop devices: a quota changed between two starts resizes it (or, when its files do not
fit, leaves it and refuses commands), an older server's workspace moves in (or stays on the poll), removal
leaves no image, no mount and no loop device, two processes of a cluster share one loop device, and a
killed process leaves nothing attached."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from modules.tools import workspace_images
from modules.tools.disk_guard import DiskGuard
from modules.tools.workspace_images import WorkspaceImages
from test.unit.loop_mounts import loops_of, mounts_under, unmount_all_under

ROOT = Path(__file__).resolve().parents[2]
MB = 2**20
pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists("/dev/loop-control")
                                or shutil.which("mkfs.ext4") is None, reason="loop mounts need root")


@pytest.fixture
def data(tmp_path):
    """A data folder whose mounts are all gone at the end, whatever the test left."""
    yield tmp_path
    unmount_all_under(tmp_path)


def _size_mb(workspace: Path) -> float:
    st = os.statvfs(workspace)
    return st.f_blocks * st.f_frsize / MB


def test_a_quota_change_grows_or_shrinks_the_file_system_and_a_shrink_that_does_not_fit_is_refused(data):
    workspace = data / "workspaces" / "c1"
    images = WorkspaceImages(data / "images", 16 * MB)
    images.open(workspace, create=True)
    assert images.holds(workspace) and 14 < _size_mb(workspace) <= 16
    (workspace / "keep.bin").write_bytes(b"k" * 6 * MB)
    images.close()

    grown = WorkspaceImages(data / "images", 32 * MB)  # the next start, with a larger quota
    grown.open(workspace, create=True)
    assert 30 < _size_mb(workspace) <= 32 and (workspace / "keep.bin").stat().st_size == 6 * MB
    grown.close()

    shrunk = WorkspaceImages(data / "images", 12 * MB)
    shrunk.open(workspace, create=True)
    assert 10 < _size_mb(workspace) <= 12 and (workspace / "keep.bin").read_bytes() == b"k" * 6 * MB
    shrunk.close()

    too_small = WorkspaceImages(data / "images", 4 * MB)  # 6 MB of files do not fit: it keeps its size
    too_small.open(workspace, create=True)
    assert 10 < _size_mb(workspace) <= 12 and (workspace / "keep.bin").stat().st_size == 6 * MB
    guard = DiskGuard(data, 0, 4 * MB, images=too_small)
    assert "WORKSPACE_MAX_MB=4" in (guard.problem(workspace) or "")  # its commands are refused
    too_small.close()
    assert mounts_under(data) == [] and loops_of(data) == []


def test_an_older_servers_workspace_moves_in_when_it_fits_and_stays_on_the_poll_when_not(data):
    images = WorkspaceImages(data / "images", 8 * MB)
    small, big = data / "workspaces" / "small", data / "workspaces" / "big"
    (small / "sub").mkdir(parents=True)
    (small / "sub" / "a.txt").write_text("older server's file")
    os.symlink("sub/a.txt", small / "link")
    big.mkdir()
    (big / "large.bin").write_bytes(os.urandom(9 * MB))

    images.open(small, create=True)
    assert images.holds(small) and os.path.ismount(small)
    assert (small / "link").read_text() == "older server's file" and os.path.islink(small / "link")
    images.open(big, create=True)
    assert not images.holds(big) and not os.path.ismount(big)  # too full: kept as it was, on the poll
    assert (big / "large.bin").stat().st_size == 9 * MB
    assert sorted(p.name for p in (data / "images").glob("*.ext4")) == ["small.ext4"]
    images.close()
    images.open(small, create=True)  # the next start mounts the image; the old copy under it is gone
    assert (small / "sub" / "a.txt").read_text() == "older server's file"
    images.close()
    assert list(small.iterdir()) == []


def test_removal_leaves_no_image_no_mount_and_no_loop_device(data):
    images = WorkspaceImages(data / "images", 8 * MB)
    workspace = data / "workspaces" / "gone"
    images.open(workspace, create=True)
    (workspace / "x").write_bytes(b"x" * MB)
    images.remove(workspace)
    assert not workspace.exists() and list((data / "images").iterdir()) == []
    assert mounts_under(data) == [] and loops_of(data) == []


HOLDER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from modules.tools import mount_namespace
    from modules.tools.workspace_images import WorkspaceImages
    assert mount_namespace.enter_private() is None
    images = WorkspaceImages(Path(sys.argv[1]), 8 * 2**20)
    workspace = Path(sys.argv[2])
    images.open(workspace, create=True)
    (workspace / sys.argv[3]).write_text(sys.argv[3])
    print("mounted", flush=True)
    for line in sys.stdin:
        print(sorted(p.name for p in workspace.iterdir()), flush=True)
""")


def _holder(data: Path, name: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(data / "images"), str(data / "workspaces" / "w"),
                             name], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdout is not None and proc.stdout.readline().strip() == "mounted"
    return proc


def test_two_processes_share_one_loop_device_and_a_killed_one_leaves_nothing_attached(data):
    """Two processes of a cluster, each in its own mount namespace: the second mounts the device the first
    attached (two devices on one image corrupt it), each sees the other's file, and once both are killed
    with SIGKILL neither a mount (they were in namespaces that died with them) nor a loop device remains."""
    first = _holder(data, "one")
    second = _holder(data, "two")
    try:
        assert len(loops_of(data)) == 1
        for proc in (first, second):
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write("list\n")
            proc.stdin.flush()
            assert proc.stdout.readline().strip() == "['one', 'two']"
        assert mounts_under(data) == []  # nothing on the host
    finally:
        for proc in (first, second):
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
    assert loops_of(data) == []
    images = WorkspaceImages(data / "images", 8 * MB)  # a restart finds the files
    images.open(data / "workspaces" / "w", create=True)
    assert sorted(p.name for p in (data / "workspaces" / "w").iterdir()) == ["one", "two"]
    images.close()


def test_past_the_kept_number_idle_workspaces_are_unmounted_and_mounted_again_on_their_next_use(data,
                                                                                                monkeypatch):
    """Each mount is copied into every sandbox's namespace (about 0.1 ms a command each), so idle ones go."""
    monkeypatch.setattr(workspace_images, "MOUNTED_KEPT", 2)
    monkeypatch.setattr(workspace_images, "IDLE_S", 0.0)
    images = WorkspaceImages(data / "images", 8 * MB)
    first, second, third = (data / "workspaces" / name for name in ("one", "two", "three"))
    images.open(first, create=True)
    (first / "kept.txt").write_text("kept")
    images.open(second, create=True)
    images.open(third, create=True)
    assert [images.holds(w) for w in (first, second, third)] == [False, True, True]
    assert not os.path.ismount(first) and len(mounts_under(data)) == 2
    guard = DiskGuard(data, 0, 8 * MB, images=images)
    assert guard.problem(first) is None and images.holds(first)  # the quota's check mounts it again
    assert (first / "kept.txt").read_text() == "kept"
    images.close()

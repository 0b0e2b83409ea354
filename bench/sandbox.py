"""Benchmark: what the command sandbox adds to a command (README, "Command sandbox").

Runs `true` through the product's `run_shell` (the path of every `run_command`: spawn,
capped log, wait, tail read) N times each way, each sandboxed way interleaved with a bare command so both
see the same machine load: unsandboxed (`SANDBOX=off`, without the command's cgroup) beside sandboxed with
no network (the default: bwrap, its seccomp filter and the command's own cgroup where the server may make
one), then unsandboxed beside sandboxed with `SANDBOX_NETWORK=on` (slirp4netns). The two sandboxed ways are
not interleaved with each other: a server runs one of them, and the kernel's teardown of a networked
sandbox's namespace holds up the next namespace made. Prints the median and p90 of each, the median added
time of the sandbox against the goal of under 20 ms for the default, and the load average. Each run
waits `--gap-ms` first (100 ms by default, both ways alike), as a model's step does between its commands:
the sandbox starts the next command's process ahead (modules/tools/sandbox_warm.py), and `--gap-ms 0`
measures commands back to back, where that process is still starting when the next command comes.

The disk quota's two ways are measured too, each sandboxed beside a bare command: the workspace its own
loop-mounted file system (the kernel holds the quota; as root, in a mount namespace of the benchmark's own,
as the server makes one) and the poll (the workspace's size read at each command's start and end). The
kernel's way is measured with `--mounted` workspaces mounted (a server keeps up to MOUNTED_KEPT, 32, and each
mount is copied into every sandbox's namespace); its image's mount is timed apart, as it is no part of a
command's time but once: at the conversation's first command (mkfs.ext4, e2fsck, attach, mount), and at its
first use after an idle workspace was unmounted past MOUNTED_KEPT (e2fsck, attach, mount).

Run: `.venv/bin/python bench/sandbox.py [--runs N]` (under a minute).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from modules.tools import mount_namespace  # noqa: E402
from modules.tools.disk_guard import DiskGuard, open_workspace  # noqa: E402
from modules.tools.sandbox import Sandbox  # noqa: E402
from modules.tools.shell import run_shell  # noqa: E402
from modules.tools.workspace_images import MOUNTED_KEPT, WorkspaceImages  # noqa: E402

GOAL_MS = 20.0


def time_true(sandbox: Sandbox, workspace: Path, log_dir: Path) -> float:
    started = time.perf_counter()
    outcome = run_shell("true", sandbox=sandbox, cwd=workspace, log_path=log_dir / "true.log", timeout_s=30,
                        tail_chars=1000, log_max_bytes=1 << 20)
    elapsed = (time.perf_counter() - started) * 1000
    if outcome.exit_code != 0:
        raise SystemExit(f"`true` failed: {outcome.output}")
    return elapsed


def time_mounts(images: WorkspaceImages, workspace: Path, mounted: int) -> list[str]:
    """Mount `mounted - 1` other workspaces, then time `workspace`'s first mount and its mount again after an
    unmount (as past MOUNTED_KEPT); all are left mounted."""
    others = [workspace.parent / f"other-{i}" for i in range(max(0, mounted - 1))]
    for other in others:
        images.open(other, create=True)
    started = time.perf_counter()
    images.open(workspace, create=True)
    first = (time.perf_counter() - started) * 1000
    images.close()
    started = time.perf_counter()
    images.open(workspace, create=True)
    again = (time.perf_counter() - started) * 1000
    for other in others:
        images.open(other, create=True)
    return [f"quota by the kernel, {mounted} workspaces mounted: a workspace's first mount (mkfs.ext4, e2fsck, "
            f"attach, mount) {first:.1f} ms, its mount again after an unmount {again:.1f} ms (once, not per command)"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--gap-ms", type=float, default=100.0, help="pause before each run, both ways alike")
    parser.add_argument("--mounted", type=int, default=MOUNTED_KEPT,
                        help="workspaces mounted while the kernel's quota is measured")
    args = parser.parse_args()
    namespace = mount_namespace.enter_private()  # before any thread, as run.py; its mounts go with this process
    with tempfile.TemporaryDirectory(prefix="bench-sandbox-") as tmp:
        root = Path(tmp)
        images = WorkspaceImages(root / "images", 256 * 2**20)
        images_problem = namespace or images.probe()
        # The baseline is a bare command: no sandbox, no cgroup; "added" is all the sandbox costs (bwrap, its
        # seccomp filter, the command's cgroup).
        bare = Sandbox(mode="off", cgroups=False).probe()
        modes = {"unsandboxed": bare, "sandboxed": Sandbox().probe(),
                 "sandboxed, network on": Sandbox(network=True).probe(),
                 "sandboxed, quota by the kernel": Sandbox(disk=DiskGuard(root, 0, 256 * 2**20, images=images)),
                 "sandboxed, quota by a poll": Sandbox(disk=DiskGuard(root, 0, 256 * 2**20)).probe()}
        if images_problem is None:
            modes["sandboxed, quota by the kernel"].probe()
        else:
            modes["sandboxed, quota by the kernel"].problem = images_problem
        for name, sandbox in list(modes.items()):
            if name != "unsandboxed" and not sandbox.active:
                print(f"{name}: skipped ({sandbox.problem})")
                del modes[name]
        pairs: dict[str, tuple[list[float], list[float]]] = {}
        mounts: list[str] = []
        for name, sandbox in modes.items():
            if name == "unsandboxed":
                continue
            workspace = root / name.replace(" ", "-").replace(",", "")
            if sandbox.disk is not None and sandbox.disk.images is not None:
                mounts = time_mounts(sandbox.disk.images, workspace, args.mounted)
            open_workspace(sandbox.disk, workspace)
            pair: tuple[list[float], list[float]] = ([], [])
            for _ in range(args.runs):
                time.sleep(args.gap_ms / 1000)
                pair[0].append(time_true(bare, workspace, root))
                time.sleep(args.gap_ms / 1000)
                pair[1].append(time_true(sandbox, workspace, root))
            pairs[name] = pair
        images.close()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"`true` through run_shell, {args.runs} runs each way beside a bare one, {args.gap_ms:g} ms apart (ms), "
          f"load average {load} on {os.cpu_count()} cores; sandboxed: {modes['sandboxed'].status_line()}")
    for name, (base_times, times) in pairs.items():
        base, median = statistics.median(base_times), statistics.median(times)
        p90 = statistics.quantiles(times, n=10)[-1]
        verdict = ("met" if median - base < GOAL_MS else "MISSED") if name == "sandboxed" else "no goal"
        print(f"  {name:<32} median {median:6.1f}   p90 {p90:6.1f}   (bare beside it: median {base:5.1f})")
        print(f"  added by {name}: {median - base:.1f} ms median (goal < {GOAL_MS:g} ms: {verdict})")
    for line in mounts:
        print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

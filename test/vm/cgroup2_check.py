"""Run as root inside the cgroup2 VM (test/vm/cgroup2_vm.py): the cgroup v2 path of the command cgroups
(modules/tools/command_cgroup.py) against a real kernel. Prints one line, `REPORT <json>`."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from modules.tools.command_cgroup import CommandCgroups

ROOT = Path("/sys/fs/cgroup")
HOG = "b = bytearray(200 * 2**20); b[::4096] = b'x' * len(b[::4096]); print('survived')"
BOMB = "for i in $(seq 40); do sleep 3 & done; wait; echo done"


def _events(folder: Path, name: str) -> dict[str, int]:
    return {k: int(v) for k, v in (line.split() for line in (folder / name).read_text().splitlines())}


def main() -> None:
    (ROOT / "cgroup.subtree_control").write_text("+memory +pids")  # delegated, as a service's own cgroup is
    cgroups = CommandCgroups(64, 16)
    report: dict[str, object] = {"mode": cgroups.mode, "problem": cgroups.problem}
    cgroup = cgroups.create("check")
    (folder,) = cgroup.dirs
    report["parent"] = str(folder.parent)
    report["memory.max"] = (folder / "memory.max").read_text().strip()
    report["pids.max"] = (folder / "pids.max").read_text().strip()
    hog = subprocess.run(cgroup.join_argv(["python3", "-c", HOG]), capture_output=True, text=True, timeout=120)
    report["hog"] = [hog.returncode, hog.stdout.strip()]
    report["oom_kill"] = _events(folder, "memory.events")["oom_kill"]
    bomb = subprocess.run(cgroup.join_argv(["/bin/sh", "-c", BOMB]), capture_output=True, text=True, timeout=120)
    report["bomb_refused"] = "fork" in bomb.stderr.lower() or "resource temporarily unavailable" in bomb.stderr
    report["pids_max_hit"] = _events(folder, "pids.events")["max"]
    cgroup.remove()
    report["removed"] = not folder.exists()
    print("REPORT " + json.dumps(report), flush=True)


if __name__ == "__main__":
    main()

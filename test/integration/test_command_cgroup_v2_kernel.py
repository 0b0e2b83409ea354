"""The cgroup v2 path of the command cgroups against a real kernel (README, "Command sandbox"). This
machine's memory and pids controllers are bound to cgroup v1, so the check runs in a VM with a kernel of its
own (test/vm/cgroup2_vm.py, prepared by `make cgroup2-vm`): a command's cgroup is made as a child of the
process's own with memory.max and pids.max, a command past its memory is killed by the kernel, one past its
processes cannot fork, and the cgroup is removed."""

from __future__ import annotations

import json
import os
import sys

import pytest

from test.vm import cgroup2_vm

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or cgroup2_vm.ready() is not None,
                                reason=f"the cgroup2 VM: {cgroup2_vm.ready()}")


def test_a_command_cgroup_on_cgroup_v2_holds_memory_and_processes_for_real():
    console = cgroup2_vm.run(f"PATH=/usr/local/bin:/usr/bin:/bin PYTHONPATH=. PYTHONDONTWRITEBYTECODE=1 "
                             f"{sys.executable} test/vm/cgroup2_check.py")
    line = next((line for line in console.splitlines() if line.startswith("REPORT ")), None)
    assert line is not None, console[-3000:]
    report = json.loads(line.removeprefix("REPORT "))
    assert report["mode"] == "cgroup v2 (memory.max, pids.max)", report
    assert (report["memory.max"], report["pids.max"]) == (str(64 * 2**20), "16"), report
    assert report["hog"] == [-9, ""] and report["oom_kill"] >= 1, report  # killed by the kernel, as a whole
    assert report["bomb_refused"] and report["pids_max_hit"] >= 1, report
    assert report["removed"], report

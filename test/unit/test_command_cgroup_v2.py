"""The cgroup v2 path of the command cgroups (modules/tools/command_cgroup.py). This machine's memory and pids
controllers are bound to its v1 hierarchies, so a cgroup2 hierarchy mounted here has neither: the path that
makes and limits a command's cgroup is tested over a folder laid out as a delegated v2 cgroup (its file
writes), and the refusal of a v2 hierarchy that does not delegate them on a real cgroup2 mount."""

from __future__ import annotations

import os
import subprocess

import pytest

from modules.tools.command_cgroup import PREFIX, CommandCgroups, remove_stale


def _delegated(tmp_path, controllers: str = "memory pids"):
    root = tmp_path / "cgroup"
    (root / "server").mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpu io memory pids\n")
    (root / "server" / "cgroup.subtree_control").write_text(controllers + "\n")
    return root


def test_a_delegated_v2_cgroup_gets_each_command_a_child_with_memory_max_and_pids_max(tmp_path):
    root = _delegated(tmp_path)
    cgroups = CommandCgroups(128, 16, root=root, own={"": "/server"})
    assert cgroups.mode == "cgroup v2 (memory.max, pids.max)", cgroups.problem
    cgroup = cgroups.create("one")
    (folder,) = cgroup.dirs
    assert folder == root / "server" / f"{PREFIX}{os.getpid()}-one"  # a child of the server's own, nowhere else
    assert (folder / "memory.max").read_text() == str(128 * 2**20)
    assert (folder / "pids.max").read_text() == "16"
    argv = cgroup.join_argv(["bwrap", "true"])
    assert argv[-3:] == [str(folder / "cgroup.procs"), "bwrap", "true"] and 'echo $$ > "$1"' in argv[2]


def test_a_v2_cgroup_that_does_not_delegate_memory_and_pids_leaves_the_rlimits(tmp_path):
    cgroups = CommandCgroups(128, 16, root=_delegated(tmp_path, "cpu"), own={"": "/server"})
    assert cgroups.mode is None and "does not delegate memory and pids" in (cgroups.problem or "")


def test_a_dead_servers_v2_cgroups_go_and_a_live_ones_stay(tmp_path):
    parent = _delegated(tmp_path) / "server"
    dead = parent / f"{PREFIX}999999999-left"  # no such pid
    live = parent / f"{PREFIX}{os.getpid()}-mine"
    dead.mkdir()
    live.mkdir()
    assert remove_stale(parent) == [dead]
    assert not dead.exists() and live.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a cgroup2 hierarchy needs root")
def test_on_a_real_cgroup2_mount_without_memory_and_pids_the_start_says_why(tmp_path):
    mount = tmp_path / "cgroup2"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "cgroup2", "none", str(mount)], capture_output=True).returncode != 0:
        pytest.skip("cgroup2 cannot be mounted here")
    try:
        if {"memory", "pids"} <= set((mount / "cgroup.controllers").read_text().split()):
            pytest.skip("this kernel's memory and pids controllers are on cgroup2: the v2 path runs for real")
        cgroups = CommandCgroups(128, 16, root=mount, own={"": "/"})
        assert cgroups.mode is None and "does not delegate memory and pids" in (cgroups.problem or "")
    finally:
        subprocess.run(["umount", str(mount)], check=False)

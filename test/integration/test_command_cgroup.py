"""Memory and processes are limited for a command as a whole (README, "Command sandbox"): under
COMMAND_MEMORY_MB=128, six processes of 70 MB each (every one under its own rlimit) cannot all live. The
command cgroups a killed server left are removed by the next start."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from modules.tools.command_cgroup import IDLE_KEPT
from test.conftest import wait_until
from test.integration.sandbox_helpers import run_in_sandbox

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

HOG = ("for i in 1 2 3 4 5 6; do python3 -c 'import time; block = bytearray(70 * 2**20); "
       "block[::4096] = b\"x\" * len(block[::4096]); time.sleep(3); print(\"survived\")' & done; wait; echo end")
FORKS = "for i in $(seq 1 40); do sleep 5 & done 2>&1 | head -3; echo started; wait"


def _cgroups_writable() -> bool:
    return any(line.split(":")[1] == "memory" for line in Path("/proc/self/cgroup").read_text().splitlines()) \
        and Path("/sys/fs/cgroup/memory").is_dir()


@pytest.mark.skipif(not _cgroups_writable(), reason="no cgroup v1 memory controller to test with")
def test_a_command_of_many_processes_is_held_to_its_memory_and_process_limits(make_server, llm):
    server = make_server(env={"AUTH_TOKENS": "alice:tok-a", "COMMAND_MEMORY_MB": "128",
                              "COMMAND_MAX_PROCESSES": "16", "COMMAND_TIMEOUT_S": "30"})
    assert "for the whole command by cgroup" in server.log_text(), server.log_text()
    result = run_in_sandbox(server, llm, HOG, token="tok-a")
    assert result["output"].count("survived") <= 1, result["output"]  # 128 MB hold one 70 MB block
    result = run_in_sandbox(server, llm, FORKS, token="tok-a")
    assert "Cannot fork" in result["output"] or "Resource temporarily unavailable" in result["output"], result
    # no process left in them but the next command's sandbox, started ahead (modules/tools/sandbox_warm.py)
    wait_until(lambda: len([p for p in _cgroups_of(server.proc.pid) if not _empty(p)]) <= 2, 10,
               what="no process left in the server's command cgroups")
    assert len(_cgroups_of(server.proc.pid)) <= 2 * (IDLE_KEPT + 1)  # v1: memory and pids, kept ones and its


def _cgroups_of(pid: int) -> list[Path]:
    return [p for root in (Path("/sys/fs/cgroup/memory"), Path("/sys/fs/cgroup/pids"))
            for p in root.rglob(f"chat-cmd-{pid}-*")]


def _empty(cgroup: Path) -> bool:
    try:
        return not (cgroup / "cgroup.procs").read_text().strip()
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not _cgroups_writable(), reason="no cgroup v1 memory controller to test with")
def test_the_command_cgroups_of_a_killed_server_are_removed_by_the_next_start(make_server, llm):
    server = make_server(env={"AUTH_TOKENS": "alice:tok-a", "COMMAND_TIMEOUT_S": "60"})
    started = run_in_sandbox(server, llm, "sleep 60", token="tok-a", run_in_background=True)
    assert started["success"], started
    killed = server.proc.pid
    wait_until(lambda: any(not _empty(p) for p in _cgroups_of(killed)), 10, what="the command in its cgroup")
    server.kill()  # its sandbox dies with it (parent-death signal); its cgroups stay behind
    assert _cgroups_of(killed)
    server.start()
    assert _cgroups_of(killed) == [], _cgroups_of(killed)
    assert "command cgroups that a server which is gone had left" in server.log_text()

"""Memory and processes are limited for a command as a whole (README, "Command sandbox"): under
COMMAND_MEMORY_MB=128, six processes of 70 MB each (every one under its own rlimit) cannot all live."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

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
    before = set(Path("/sys/fs/cgroup/memory").rglob("chat-cmd-*"))  # a killed server's are not this test's
    result = run_in_sandbox(server, llm, HOG, token="tok-a")
    assert result["output"].count("survived") <= 1, result["output"]  # 128 MB hold one 70 MB block
    result = run_in_sandbox(server, llm, FORKS, token="tok-a")
    assert "Cannot fork" in result["output"] or "Resource temporarily unavailable" in result["output"], result
    leftovers = [p for p in Path("/sys/fs/cgroup/memory").rglob("chat-cmd-*") if p not in before]
    assert not leftovers, leftovers  # each command's cgroup is removed with it

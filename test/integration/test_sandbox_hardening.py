"""Inside the sandbox (README, "Command sandbox"): no nested user namespace, the seccomp filter's escape
calls refused, the metadata address unreachable with the network on; the start-up line says what holds."""

from __future__ import annotations

import shutil

import pytest

from test.integration.sandbox_helpers import run_in_sandbox

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

PROBE = ("unshare -Ur id; echo unshare=$?; unshare -U true; echo unshare_u=$?; "
         "python3 -c 'import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); "
         "print(\"keyctl\", libc.syscall(250, 0, 0, 0, 0, 0), ctypes.get_errno()); "
         "print(\"bpf\", libc.syscall(321, 0, 0, 0), ctypes.get_errno()); "
         "print(\"threads\", __import__(\"concurrent.futures\").futures.ThreadPoolExecutor(2).submit(os.getpid)"
         ".result() == os.getpid())'")


def test_no_nested_user_namespace_and_no_escape_calls(make_server, llm):
    server = make_server(env={"AUTH_TOKENS": "alice:tok-a", "COMMAND_TIMEOUT_S": "20"})
    assert "seccomp filter" in server.log_text() and "NO seccomp" not in server.log_text()
    result = run_in_sandbox(server, llm, PROBE, token="tok-a")
    out = result["output"]
    assert "unshare=1" in out and "unshare_u=1" in out, out  # `unshare -Ur` had given root in a new namespace
    assert "uid=0" not in out
    assert "keyctl -1 1" in out and "bpf -1 1" in out, out  # EPERM
    assert "threads True" in out, out  # clone3 answers ENOSYS: threads start through clone


@pytest.mark.skipif(shutil.which("slirp4netns") is None, reason="slirp4netns is not installed")
def test_with_network_on_the_metadata_address_is_unreachable(make_server, llm):
    server = make_server(env={"AUTH_TOKENS": "alice:tok-a", "SANDBOX_NETWORK": "on", "COMMAND_TIMEOUT_S": "20"})
    assert "169.254.0.0/16 unreachable" in server.log_text()
    probe = ("ip route get 169.254.169.254; python3 -c \"import socket; s = socket.socket(); s.settimeout(3); "
             "print('metadata', s.connect_ex(('169.254.169.254', 80)))\"")
    result = run_in_sandbox(server, llm, probe, token="tok-a")
    assert "No route to host" in result["output"], result["output"]
    assert "metadata 113" in result["output"] or "metadata 101" in result["output"], result["output"]

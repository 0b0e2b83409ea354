"""Hostile commands through the real server with two users: the sandbox holds (README, "Command sandbox").

Each command is what a model could be talked into running by text it read; every
test here fails on a server that runs commands with its own authority.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

import pytest
import redis
import requests

from modules.event_catalogue import ToolResultEvent
from modules.statuses import CommandStatus, SendStatus
from test.conftest import wait_until
from test.scripted_llm import text, tool_calls

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

TOKENS = "alice:tok-alice-7f3a,bob:tok-bob-91c2"
API_KEY = "sk-test-secret-4411"


def run(server, llm, command: str, *, token: str, conversation_id: str | None = None, **args) -> tuple[dict, str]:
    """One turn whose model runs `command`; returns the tool's result and the conversation id."""
    llm.script(tool_calls(("run_command", {"command": command, **args})))
    llm.script(text("done"))
    body = {"message": "please run it"}
    if conversation_id:
        body["conversation_id"] = conversation_id
    res = server.post("/api/tasks", body, token=token)
    assert res.status_code == 202, res.text
    sent = res.json()
    path = f"/api/messages/{sent['message_id']}"  # the route follows the acknowledgement (as this user)
    sent = wait_until(lambda: (m := server.get(path, token=token).json()).get("status") == SendStatus.ROUTED and m, 30,
                      what="the message's route")
    task = server.wait_task(sent["task_id"], timeout=40, token=token)
    result = next(json.loads(e["data"]["result"]) for e in task["events"] if e["type"] == ToolResultEvent.TYPE)
    return result, sent["conversation_id"]


def sandbox_processes(marker: str) -> list[int]:
    """Host pids of `sleep` processes whose argument starts with `marker` (numbers no other test sleeps)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if cmdline.startswith(f"sleep {marker}"):
                pids.append(int(entry.name))
    return pids


@pytest.fixture
def two_users(make_server):
    server = make_server(env={"AUTH_TOKENS": TOKENS, "OPENAI_API_KEY": API_KEY, "COMMAND_TIMEOUT_S": "20"})
    server.token = "tok-alice-7f3a"
    return server


def test_a_command_sees_only_its_own_conversations_workspace(two_users, llm):
    server = two_users
    made, alice_cid = run(server, llm, "echo alice-private-4242 > secret.txt && cat secret.txt", token="tok-alice-7f3a")
    assert made["success"] and "alice-private-4242" in made["output"]
    alice_dir = server.workspace(alice_cid)
    alice_host_dir = server.data_dir / "workspaces" / alice_cid
    assert (alice_dir / "secret.txt").is_file()

    probe = (f"cat ../*/secret.txt {alice_host_dir}/secret.txt; ls .. {server.data_dir}; "
             f"echo pwned > {alice_host_dir}/pwned.txt; echo pwned > ../{alice_cid}/pwned.txt; "
             # every folder but the host's read-only /usr and the kernel's: a walk of those can outlast the
             # command's timeout on a busy machine, and neither can hold another conversation's files
             "find / \\( -path /usr -o -path /proc -o -path /sys \\) -prune -o -name secret.txt -print 2>/dev/null; "
             "pwd")
    result, bob_cid = run(server, llm, probe, token="tok-bob-91c2")
    assert bob_cid != alice_cid
    assert "alice-private-4242" not in result["output"]
    assert alice_cid not in result["output"].replace(f"{alice_host_dir}", "").replace(f"../{alice_cid}", "")
    assert not (alice_dir / "pwned.txt").exists()
    assert result["output"].strip().endswith("/workspace")


def test_no_secret_and_no_database_reach_a_command(two_users, llm):
    server = two_users
    db_file = server.data_dir / "app.db"
    assert db_file.is_file()
    result, _ = run(server, llm, (
        "env; cat /proc/*/environ /proc/*/cmdline 2>/dev/null | tr '\\0' '\\n'; "
        f"ls -la {server.data_dir}; python3 -c \"import sqlite3; "
        f"print(sqlite3.connect('file:{db_file}?mode=ro', uri=True).execute('select * from users').fetchall())\"; "
        "cat /etc/shadow /etc/postgresql/*/main/pg_hba.conf; ls /root /work /home"), token="tok-alice-7f3a")
    output = result["output"]
    for secret in ("tok-alice-7f3a", "tok-bob-91c2", API_KEY, "AUTH_TOKENS", "OPENAI", "DATABASE_URL", "alice"):
        assert secret not in output, secret
    assert "unable to open database file" in output or "No such file" in output
    assert "HOME=/tmp" in output and "PATH=" in output


def test_no_connection_to_the_database_redis_or_the_server(two_users, llm):
    server = two_users
    ports = {"postgres": 5432, "mariadb": 3306, "redis": 6379, "server": server.port}
    script = ("import socket\n"
              f"for name, port in {ports!r}.items():\n"
              "    try:\n"
              "        socket.create_connection(('127.0.0.1', port), 2).close(); print(name, 'OPEN')\n"
              "    except OSError as exc:\n"
              "        print(name, 'blocked', exc)\n")
    result, _ = run(server, llm, f"python3 -c \"{script}\"; ls /run/postgresql /var/run/mysqld",
                    token="tok-alice-7f3a")
    assert "OPEN" not in result["output"], result["output"]
    assert result["output"].count("blocked") == len(ports)
    # the ports are open from outside the sandbox: the test would pass for the wrong reason otherwise
    redis.Redis(host="127.0.0.1", port=6379, socket_timeout=2).ping()


@pytest.mark.parametrize("attack", [
    "kill -9 $PPID; kill -9 1; echo survived",
    "kill -9 -1; echo survived",
    "f() { f | f & }; f; sleep 2; echo survived",
])
def test_the_server_survives_a_command_that_kills_or_forks(two_users, llm, attack):
    server = two_users
    result, cid = run(server, llm, attack, token="tok-alice-7f3a", timeout=8)
    assert server.proc.poll() is None, server.log_text()
    assert requests.get(server.url + "/healthz", timeout=5).status_code == 200
    after, _ = run(server, llm, "echo still-here", token="tok-alice-7f3a", conversation_id=cid)
    assert after["success"] and "still-here" in after["output"]


def test_no_process_outlives_its_timeout(two_users, llm):
    server = two_users
    result, _ = run(server, llm, "setsid sleep 7301 & nohup sleep 7302 >/dev/null & sleep 7303",
                    token="tok-alice-7f3a", timeout=1)
    assert "timed out" in result["error"]
    assert wait_until(lambda: not sandbox_processes("730"), 5, what="no sleeps left")


def test_no_process_outlives_its_end_or_its_cancel(two_users, llm):
    server = two_users
    done, cid = run(server, llm, "setsid sleep 7311 & (sleep 7312 &) ; echo ended", token="tok-alice-7f3a")
    assert done["success"] and "ended" in done["output"]
    assert wait_until(lambda: not sandbox_processes("731"), 5, what="no sleeps left after the end")

    started, _ = run(server, llm, "setsid sleep 7321 & sleep 7322", token="tok-alice-7f3a",
                     conversation_id=cid, run_in_background=True)
    wait_until(lambda: len(sandbox_processes("732")) == 2, 10, what="the background sleeps")
    res = server.post(f"/api/background_commands/{started['command_id']}/cancel")
    assert res.status_code == 200, res.text
    assert wait_until(lambda: not sandbox_processes("732"), 5, what="no sleeps left after the cancel")


def test_no_process_outlives_a_server_killed_mid_command(two_users, llm):
    server = two_users
    started, cid = run(server, llm, "setsid sleep 7331 & sleep 7332", token="tok-alice-7f3a",
                       run_in_background=True)
    wait_until(lambda: len(sandbox_processes("733")) == 2, 10, what="the background sleeps")
    server.proc.send_signal(signal.SIGKILL)
    server.proc.wait(10)
    assert wait_until(lambda: not sandbox_processes("733"), 5, what="no sleeps left after the server died")
    server.start()
    commands = server.get(f"/api/background_commands?conversation_id={cid}").json()["data"]
    assert [c["status"] for c in commands if c["command_id"] == started["command_id"]] == [CommandStatus.LOST]


@pytest.mark.parametrize("timeout", ["NaN", "Infinity", "-5", "0", '"ten"'])
def test_a_timeout_that_would_disable_the_limit_is_refused(two_users, llm, timeout):
    server = two_users
    llm.script(tool_calls(("run_command", f'{{"command": "echo ran", "timeout": {timeout}}}')))
    llm.script(text("done"))
    sent = server.send("run it")
    task = server.wait_task(sent["task_id"])
    result = next(json.loads(e["data"]["result"]) for e in task["events"] if e["type"] == ToolResultEvent.TYPE)
    assert result["success"] is False and "timeout" in result["error"], result
    assert "ran" not in json.dumps(result.get("output", ""))


def test_output_on_disk_is_capped_head_and_tail(make_server, llm):
    server = make_server(env={"COMMAND_LOG_MAX_BYTES": "20000"})
    started, cid = run(server, llm, "echo FIRST-LINE; yes filler | head -c 30000000; echo; echo LAST-LINE",
                       token="", run_in_background=True)
    command_id = started["command_id"]

    def finished():
        data = server.get(f"/api/background_commands?conversation_id={cid}").json()["data"]
        return next((c for c in data if c["command_id"] == command_id and c["status"] != CommandStatus.RUNNING), None)
    cmd = wait_until(finished, 30, what="the command's end")
    assert cmd["status"] == CommandStatus.SUCCEEDED and cmd["output_truncated"] is True
    assert cmd["output_tail"].rstrip().endswith("LAST-LINE")
    log_file = server.data_dir / "command_logs" / f"{command_id}.log"
    content = log_file.read_bytes()
    assert len(content) < 20000 + 100
    assert content.startswith(b"FIRST-LINE") and content.rstrip().endswith(b"LAST-LINE")
    assert b"bytes of output dropped" in content


def test_ordinary_work_runs_in_the_sandbox(two_users, llm):
    server = two_users
    result, cid = run(server, llm, (
        "ls -la && python3 -c 'print(6*7)' && git init -q repo && mkdir -p a/b && cd a/b && echo note > n.txt "
        "&& cat n.txt && pwd && cd ../.. && ls a/b && echo tmp-ok > /tmp/x && cat /tmp/x"), token="tok-alice-7f3a")
    assert result["success"], result
    for expected in ("42", "note", "/workspace/a/b", "n.txt", "tmp-ok"):
        assert expected in result["output"]
    assert (server.workspace(cid) / "repo" / ".git").is_dir()

    started, _ = run(server, llm, "echo bg-out; exit 3", token="tok-alice-7f3a", conversation_id=cid,
                     run_in_background=True)

    def finished():
        data = server.get(f"/api/background_commands?conversation_id={cid}").json()["data"]
        return next((c for c in data
                     if c["command_id"] == started["command_id"] and c["status"] != CommandStatus.RUNNING), None)
    cmd = wait_until(finished, 20, what="the background command's end")
    assert cmd["status"] == CommandStatus.FAILED and cmd["exit_code"] == 3 and "bg-out" in cmd["output_tail"]


def test_without_bubblewrap_a_server_with_tokens_refuses_commands(make_server, llm, tmp_path):
    no_bwrap = tmp_path / "bin"
    no_bwrap.mkdir()
    os.symlink(shutil.which("python3") or "/usr/bin/python3", no_bwrap / "python3")
    server = make_server(env={"AUTH_TOKENS": TOKENS, "PATH": str(no_bwrap)})
    server.token = "tok-alice-7f3a"
    assert "command sandbox: UNAVAILABLE" in server.log_text() and "refused" in server.log_text()
    result, _ = run(server, llm, "echo should-not-run", token="tok-alice-7f3a")
    assert result["success"] is False and "SANDBOX=off" in result["error"]
    assert "should-not-run" not in json.dumps(result)


def test_without_bubblewrap_a_loopback_server_warns_and_runs_them(make_server, llm, tmp_path):
    no_bwrap = tmp_path / "bin"
    no_bwrap.mkdir()
    server = make_server(env={"PATH": str(no_bwrap)})
    assert "commands run UNSANDBOXED" in server.log_text()
    result, _ = run(server, llm, "echo ran-unsandboxed; env", token="")
    assert result["success"] and "ran-unsandboxed" in result["output"]
    assert "OPENAI_API_KEY" not in result["output"]


@pytest.mark.skipif(shutil.which("slirp4netns") is None, reason="slirp4netns is not installed")
def test_with_the_network_on_the_hosts_services_stay_out_of_reach(make_server, llm):
    server = make_server(env={"SANDBOX_NETWORK": "on"})
    assert "command sandbox: bubblewrap, network on" in server.log_text()  # else 10.0.2.2 would be a real address
    targets = [(host, port) for host in ("127.0.0.1", "10.0.2.2") for port in (5432, 6379, server.port)]
    script = ("import socket\n"
              f"for target in {targets!r}:\n"
              "    try:\n"
              "        socket.create_connection(target, 2).close(); print(target, 'OPEN')\n"
              "    except OSError as exc:\n"
              "        print(target, 'blocked', exc)\n")
    result, _ = run(server, llm, f"grep -c tap0 /proc/net/dev; python3 -c \"{script}\"", token="")
    assert result["output"].startswith("1\n"), result["output"]  # it has a network interface of its own
    assert "OPEN" not in result["output"] and result["output"].count("blocked") == len(targets), result["output"]

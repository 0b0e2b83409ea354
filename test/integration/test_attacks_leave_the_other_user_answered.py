"""One user's attacks leave the other answered (issue 22's attacks, as one suite against one real server with
two users; README, "Security"): while alice attacks, bob (from another loopback address) has his /healthz,
a send and the list of his messages answered within a second, nothing of his is lost, and the server is the
same process from the first attack to the last.

The attacks: half-open and trickling sockets past the server's pool, a pipe swapped under a download, a
listing of 200,000 files, a command writing past its workspace's quota (held by the kernel: each workspace is
a file system of its own) and others filling the data disk down to its reserve, a command holding six 70 MB
blocks under a 128 MB limit, a fork bomb, twenty background commands in one step, an upload onto a name the
agent made a folder, and a flood of sends. What an attack reads rather than blocks (the sandbox's escapes,
host paths, fenced notices, headers, file names) has its own tests: test_sandbox*.py, test_notice_fence.py,
test_security_headers.py, test_workspace_files.py.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time

import pytest

from modules.event_catalogue import ToolResultEvent
from test.conftest import TWO_USERS, wait_until
from test.integration.hostile_clients import LOW_FILE_LIMIT_LAUNCHER, Swapper, get_as, other_client
from test.integration.sandbox_helpers import send_routed
from test.scripted_llm import text, tool_calls
from test.scripted_steps import match_last_user, match_system

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("bwrap") is None,
                                reason="the suite mounts a small data disk (root) and runs sandboxed commands")

MASTER = match_system("You are MasterAgent")
SLOW_SOCKETS = 520
WRITER = ("i=0; while [ $i -lt {mb} ]; do head -c 1048576 /dev/zero > {name}-$i; i=$((i+1)); done; echo wrote")
HOG = ("for i in 1 2 3 4 5 6; do python3 -c 'import time; block = bytearray(70 * 2**20); "
       "block[::4096] = b\"x\" * len(block[::4096]); time.sleep(2); print(\"survived\")' & done; wait")
FORK_BOMB = "b() { b | b & }; b; sleep 3; echo after"


class Bystander(threading.Thread):
    """bob, in a loop until stopped: /healthz, a send into his conversation, the list of its messages."""

    def __init__(self, server, cid: str):
        super().__init__(daemon=True)
        self.server, self.cid = server, cid
        self.stop = threading.Event()
        self.slowest: dict[str, float] = {}
        self.failed: list[tuple[str, int]] = []
        self.sent = 0

    def run(self) -> None:
        calls = [("healthz", "GET", "/healthz", None),
                 ("send", "POST", "/api/tasks", {"message": "bob's line", "conversation_id": self.cid}),
                 ("list", "GET", f"/api/conversations/{self.cid}/messages", None)]
        while not self.stop.is_set():
            for name, method, path, body in calls:
                try:
                    status, took = other_client(self.server, method, path, body)
                except OSError as exc:
                    status, took = 0, 5.0
                    self.failed.append((f"{name}: {exc}", 0))
                self.slowest[name] = max(self.slowest.get(name, 0.0), took)
                if status not in (200, 202):
                    self.failed.append((name, status))
                self.sent += name == "send" and status == 202
            self.stop.wait(0.3)  # one round a third of a second: within bob's send limit


def during(server, cid: str, attack, what: str):
    """Run `attack` while bob works; bob was answered within a second each time, and never refused."""
    bob = Bystander(server, cid)
    bob.start()
    try:
        result = attack()
    finally:
        bob.stop.set()
        bob.join(15)
    assert bob.failed == [], (what, bob.failed)
    assert set(bob.slowest) == {"healthz", "send", "list"}, (what, bob.slowest)
    assert max(bob.slowest.values()) < 1, (what, bob.slowest)
    SENT[0] += bob.sent
    return result


SENT = [0]  # bob's accepted sends over the whole suite


@pytest.fixture
def small_disk(tmp_path):
    mount = tmp_path / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96m", "tmpfs", str(mount)], check=True)
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def alice_step(server, llm, calls: list[tuple[str, dict]], tag: str, conversation_id: str | None = None) -> list:
    """One master step of alice's whose model makes `calls`; their results."""
    mine = match_last_user(tag)

    def match(body: dict) -> bool:  # alice's master turn, never a routing stage nor bob's turn
        return MASTER(body) and mine(body)

    llm.script(tool_calls(*calls), match=match)
    llm.script(text("that is all"), match=match)
    sent = send_routed(server, tag, token="tok-alice", conversation_id=conversation_id)
    task = server.wait_task(sent["task_id"], timeout=90, token="tok-alice")
    return [json.loads(e["data"]["result"]) for e in task["events"] if e["type"] == ToolResultEvent.TYPE]


def alice_runs(server, llm, command: str, tag: str, conversation_id: str | None = None) -> dict:
    return alice_step(server, llm, [("run_command", {"command": command})], tag, conversation_id)[0]


def test_while_one_user_attacks_the_other_is_answered_within_a_second_and_loses_nothing(make_server, llm,
                                                                                       small_disk):
    server = make_server(data_dir=small_disk / "data", launcher=LOW_FILE_LIMIT_LAUNCHER, env={
        "AUTH_TOKENS": TWO_USERS, "CLIENT_HEADER_TIMEOUT_S": "4", "CLIENT_IDLE_TIMEOUT_S": "5",
        "CLIENT_MAX_CONNECTIONS": "100", "COMMAND_MEMORY_MB": "128", "COMMAND_MAX_PROCESSES": "32",
        "COMMAND_TIMEOUT_S": "30", "WORKSPACE_MAX_MB": "8", "DATA_DISK_RESERVE_MB": "40",
        "MAX_COMMANDS_PER_CONVERSATION": "5", "RATE_LIMIT_SENDS_PER_MIN": "250", "WORKSPACE_QUOTA": "loop"})
    pid = server.proc.pid
    bob = server.post("/api/conversations", {"title": "bob's"}, token="tok-bob").json()["conversation_id"]
    alice = server.post("/api/conversations", {"title": "alice's"}, token="tok-alice").json()["conversation_id"]
    first = server.request("POST", f"/api/conversations/{alice}/files", files={"file": ("a.txt", b"a")},
                           token="tok-alice")
    assert first.status_code == 201, first.text  # her workspace's own file system is made and mounted
    workspace = server.workspace(alice)

    def slow_sockets() -> None:
        socks = []
        try:
            for i in range(SLOW_SOCKETS):
                sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
                if i % 2:
                    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
                socks.append(sock)
            time.sleep(6)  # past the header timeout, with every socket still open on alice's side
        finally:
            for sock in socks:
                sock.close()

    during(server, bob, slow_sockets, "half-open sockets")

    def swapped_download() -> None:
        swapper = Swapper(workspace, "report.txt")
        swapper.start()
        try:
            for _ in range(20):
                try:
                    get_as(server, f"/api/conversations/{alice}/files/report.txt", 3)
                except OSError:
                    pass
        finally:
            swapper.stop.set()
            swapper.join(5)
            swapper.unblock()

    during(server, bob, swapped_download, "a pipe swapped under a download")

    # more files than an 8 MB file system has inodes: in a conversation of hers with no command yet (its
    # folder has no file system of its own until a command or an upload makes one)
    crowded = server.post("/api/conversations", {"title": "many"}, token="tok-alice").json()["conversation_id"]
    many = server.workspace(crowded)
    many.mkdir()
    for i in range(200_000):
        (many / f"f{i:06d}").touch()

    def list_many() -> None:  # four listings at once, as in test_workspace_files_never_block.py
        listers = [threading.Thread(target=lambda: get_as(server, f"/api/conversations/{crowded}/files?limit=1000",
                                                        30)) for _ in range(4)]
        for lister in listers:
            lister.start()
        for lister in listers:
            lister.join(60)

    during(server, bob, list_many, "200,000 files listed")
    shutil.rmtree(many)

    quota = during(server, bob, lambda: alice_runs(server, llm, WRITER.format(mb=40, name="q"), "fill the quota",
                                                   alice), "a command writing past its quota")
    assert quota["success"] is False and "WORKSPACE_MAX_MB" in quota["error"], quota
    for name in workspace.glob("q-*"):
        name.unlink()
    big = during(server, bob, lambda: alice_runs(server, llm, "head -c 40000000 /dev/zero > big; ls -l big",
                                                 "one big file", alice), "one file written past the quota")
    assert "No space left on device" in big["output"], big  # the workspace's own file system is full
    assert (workspace / "big").stat().st_size <= 8 * 2**20, big
    (workspace / "big").unlink()

    def fill_disk() -> dict:
        for n in range(12):
            result = alice_runs(server, llm, WRITER.format(mb=7, name="d"), f"fill the disk {n}")
            if not result["success"]:
                return result
        return {}

    low = during(server, bob, fill_disk, "the data disk filled down to its reserve")
    assert "DATA_DISK_RESERVE_MB" in low.get("error", ""), low
    assert shutil.disk_usage(small_disk).free > 16 * 2**20  # the reserve held
    for folder in (server.data_dir / "workspaces").iterdir():
        for name in server.workspace(folder.name).glob("d-*"):
            name.unlink()

    hog = during(server, bob, lambda: alice_runs(server, llm, HOG, "hold memory", alice), "memory past the limit")
    assert hog["output"].count("survived") <= 1, hog
    bomb = during(server, bob, lambda: alice_runs(server, llm, FORK_BOMB, "fork bomb", alice), "a fork bomb")
    assert "after" in bomb["output"] or bomb["success"] is False, bomb

    sleeps = [("run_command", {"command": f"sleep 20.{i:02d}", "run_in_background": True}) for i in range(20)]
    started = during(server, bob, lambda: alice_step(server, llm, sleeps, "start twenty", alice),
                     "twenty background commands in one step")
    assert [r["success"] for r in started] == [True] * 5 + [False] * 15, started

    (workspace / "made-a-folder").mkdir()
    up = during(server, bob, lambda: server.request(
        "POST", f"/api/conversations/{alice}/files", files={"file": ("made-a-folder", b"x")}, token="tok-alice"),
        "an upload onto a folder")
    assert (up.status_code, up.json()["code"]) == (409, "name_is_folder"), up.text

    def flood() -> list[int]:
        return [server.post("/api/tasks", {"message": "flood", "conversation_id": alice},
                            token="tok-alice").status_code for _ in range(520)]  # two windows at most

    codes = during(server, bob, flood, "a flood of sends")
    assert 429 in codes

    assert server.proc.poll() is None and server.proc.pid == pid  # no restart, from the first attack to the last

    def bobs_lines() -> int:
        history = server.get(f"/api/conversations/{bob}/messages", token="tok-bob").json()["data"]
        queued = server.get(f"/api/conversations/{bob}/queued", token="tok-bob").json()["data"]
        return len([m for m in history if m["role"] == "user"]) + len(queued)

    wait_until(lambda: bobs_lines() == SENT[0], 60, what="every one of bob's sends stored")

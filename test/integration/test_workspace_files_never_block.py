"""A workspace's files cannot freeze the server (docs/API.md, "files"): a named pipe swapped in under a
name while it is downloaded, and a folder of 200,000 files listed, leave the other user's requests answered
within a second."""

from __future__ import annotations

import os
import threading
import time

import pytest
import requests

from test.conftest import TWO_USERS, wait_until
from test.integration.helpers import healthz_s, slowest_healthz
from test.integration.hostile_clients import Swapper, get_as


@pytest.fixture
def two_users(make_server):
    server = make_server(env={"AUTH_TOKENS": TWO_USERS})
    server.token = "tok-alice"
    return server


def test_a_pipe_swapped_under_a_download_freezes_nothing(two_users):
    server = two_users
    cid = server.post("/api/conversations", {"title": "pipes"}).json()["conversation_id"]
    bob_cid = server.post("/api/conversations", {"title": "bob"}, token="tok-bob").json()["conversation_id"]
    folder = server.workspace(cid)
    folder.mkdir(parents=True, exist_ok=True)
    swapper = Swapper(folder, "x.txt")
    swapper.start()
    answers: dict[int, int] = {}
    try:
        for _ in range(400):
            try:
                res = get_as(server, f"/api/conversations/{cid}/files/x.txt", 2)
            except requests.Timeout:
                pytest.fail("a download waited on the named pipe: the server stopped answering")
            answers[res.status_code] = answers.get(res.status_code, 0) + 1
            if res.status_code == 200:
                assert res.content == b"regular content"
        assert healthz_s(server) < 1
        assert server.get(f"/api/conversations/{bob_cid}/files", token="tok-bob").status_code == 200
    finally:
        swapper.stop.set()
        swapper.join(5)
        swapper.unblock()
    assert set(answers) <= {200, 404} and answers.get(404), answers  # the pipe was met, and refused


def test_a_folder_of_200k_files_lists_in_pages_while_others_are_answered(two_users):
    server = two_users
    cid = server.post("/api/conversations", {"title": "many"}).json()["conversation_id"]
    folder = server.workspace(cid)
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(200_000):
        (folder / f"f{i:06d}").touch()
    os.mkfifo(folder / "f000000.pipe")
    (folder / "f000001.dir").mkdir()
    os.symlink("/etc/passwd", folder / "f000002.link")
    (folder / "f000003\u202etxt.exe").touch()  # a right-to-left override: never listed

    with slowest_healthz(server) as slowest:
        page = f"/api/conversations/{cid}/files?limit=1000"
        listers = [threading.Thread(target=lambda: get_as(server, page, 30)) for _ in range(4)]
        for lister in listers:
            lister.start()
        for lister in listers:
            lister.join(60)
    assert slowest[0] < 1, f"/healthz took {slowest[0]:.2f} s while the folder was listed"

    first = server.get(f"/api/conversations/{cid}/files?limit=3").json()
    assert [f["name"] for f in first["data"]] == ["f000000", "f000001", "f000002"]
    assert first["next_cursor"] == "f000002"
    after = server.get(f"/api/conversations/{cid}/files", params={"limit": 2, "cursor": first["next_cursor"]})
    assert [f["name"] for f in after.json()["data"]] == ["f000003", "f000004"]
    last = server.get(f"/api/conversations/{cid}/files", params={"limit": 5, "cursor": "f199997"}).json()
    assert [f["name"] for f in last["data"]] == ["f199998", "f199999"] and last["next_cursor"] is None
    res = server.get(f"/api/conversations/{cid}/files?limit=5000")
    assert (res.status_code, res.json()["code"]) == (400, "invalid_limit")


def test_sixty_listings_of_a_folder_a_command_keeps_changing_hold_up_no_other_users_listing(two_users):
    """Alice asks for her folder of 200,000 files sixty times at once, over and over, while it keeps changing (so no
    scan can be kept): Bob's upload and listing of his own workspace are answered within seconds, not after sixty
    scans of hers (they waited for the thread pool her listings held)."""
    server = two_users
    cid = server.post("/api/conversations", {"title": "many"}).json()["conversation_id"]
    folder = server.workspace(cid)
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(200_000):
        (folder / f"f{i:06d}").touch()
    bob_cid = server.post("/api/conversations", {"title": "bob"}, token="tok-bob").json()["conversation_id"]
    stop = threading.Event()
    listed = [0]

    def change() -> None:
        n = 0
        while not stop.is_set():
            (server.workspace(cid) / f"new{n}").touch()
            n += 1
            time.sleep(0.01)

    def list_again() -> None:
        while not stop.is_set():
            try:
                get_as(server, f"/api/conversations/{cid}/files?limit=10", 30)
            except requests.RequestException:
                continue
            listed[0] += 1

    threads = [threading.Thread(target=change, daemon=True)] + \
        [threading.Thread(target=list_again, daemon=True) for _ in range(60)]
    for thread in threads:
        thread.start()
    started = time.monotonic()
    try:
        wait_until(lambda: listed[0] >= 5, timeout=60, what="alice's listings answered")
        started = time.monotonic()
        up = requests.post(f"{server.url}/api/conversations/{bob_cid}/files", files={"file": ("b.txt", b"bob")},
                           headers={"Authorization": "Bearer tok-bob"}, timeout=20)
        assert up.status_code == 201, up.text
        res = get_as(server, f"/api/conversations/{bob_cid}/files", 20, token="tok-bob")
        assert [f["name"] for f in res.json()["data"]] == ["b.txt"]
    except requests.Timeout:
        pytest.fail("Bob waited over 20 s while Alice's folder was listed sixty times at once")
    finally:
        took = time.monotonic() - started
        stop.set()
        for thread in threads:
            thread.join(40)
    assert took < 3, f"Bob's upload and listing took {took:.2f} s while Alice's folder was listed sixty times at once"


def test_deleting_a_conversation_whose_workspace_holds_200k_files_freezes_no_one(make_server):
    """Where a poll holds the quota the workspace is a plain folder: removing its 200,000 files takes seconds of
    system calls, which must not run on the event loop every client shares (docs/API.md, DELETE)."""
    server = make_server(env={"AUTH_TOKENS": TWO_USERS, "WORKSPACE_QUOTA": "poll"})
    server.token = "tok-alice"
    cid = server.post("/api/conversations", {"title": "many"}).json()["conversation_id"]
    folder = server.workspace(cid)
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(200_000):
        (folder / f"f{i:06d}").touch()
    with slowest_healthz(server) as slowest:
        res = requests.delete(f"{server.url}/api/conversations/{cid}", headers={"Authorization": "Bearer tok-alice"},
                              timeout=60)
        assert res.status_code == 204, res.text
        wait_until(lambda: not folder.exists(), timeout=60, what="the workspace removed")
    assert slowest[0] < 1, f"/healthz took {slowest[0]:.2f} s while the workspace was removed"

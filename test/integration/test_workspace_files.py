"""Workspace files: upload, list, download (docs/API.md), and what an agent's command reads of them."""

from __future__ import annotations

import http.client
import json
import os
import threading

import pytest
import requests

from modules.event_catalogue import ToolResultEvent
from modules.statuses import TaskStatus
from test.conftest import TWO_USERS, wait_until
from test.scripted_llm import text, tool_calls


@pytest.fixture
def files_server(make_server):
    server = make_server(env={"AUTH_TOKENS": TWO_USERS, "UPLOAD_MAX_MB": "0.05"})  # 52,428 bytes
    server.token = "tok-alice"
    return server


def _upload(server, cid: str, name: str, content: bytes, token: str | None = None) -> requests.Response:
    return server.request("POST", f"/api/conversations/{cid}/files", files={"file": (name, content)},
                          **({"token": token} if token else {}))


def test_upload_list_download_survive_a_restart_and_an_agent_reads_the_file(files_server, llm):
    server = files_server
    cid = server.post("/api/conversations", {"title": "files"}).json()["conversation_id"]
    assert server.get(f"/api/conversations/{cid}/files").json()["data"] == []

    res = _upload(server, cid, "notes.txt", b"line one\nsecret-token-42\n")
    assert res.status_code == 201, res.text
    info = res.json()
    assert info["name"] == "notes.txt" and info["size"] == 25 and info["modified"].endswith("Z")
    assert _upload(server, cid, "data é.csv", b"a,b\n1,2\n").status_code == 201
    listed = server.get(f"/api/conversations/{cid}/files").json()["data"]
    assert [(f["name"], f["size"]) for f in listed] == [("data é.csv", 8), ("notes.txt", 25)]

    server.restart()
    down = server.get(f"/api/conversations/{cid}/files/notes.txt")
    assert down.status_code == 200 and down.content == b"line one\nsecret-token-42\n"
    assert down.headers["Content-Disposition"].startswith("attachment;")
    assert server.get(f"/api/conversations/{cid}/files/missing.txt").status_code == 404

    llm.script(tool_calls(("run_command", {"command": "cat /workspace/notes.txt"})))
    llm.script(text("The file holds a token."))
    sent = server.send("read my notes", cid)
    task = server.wait_task(sent["task_id"], timeout=30)
    assert task["status"] == TaskStatus.SUCCEEDED, task
    result = json.loads(next(e for e in task["events"] if e["type"] == ToolResultEvent.TYPE)["data"]["result"])
    assert result["success"] is True and "secret-token-42" in result["output"], result

    # a replaced file keeps its name with the new content
    assert _upload(server, cid, "notes.txt", b"v2").json()["size"] == 2
    assert server.get(f"/api/conversations/{cid}/files/notes.txt").content == b"v2"


def test_bad_names_large_files_and_other_users_change_nothing(files_server, llm):
    server = files_server
    cid = server.post("/api/conversations", {"title": "files"}).json()["conversation_id"]
    workspace = server.workspace(cid)
    for name in ("../escape.txt", "a/b.txt", "..", "bad\x00name", "x" * 256):
        res = _upload(server, cid, name, b"nope")
        assert (res.status_code, res.json()["code"]) == (400, "invalid_filename"), name
    res = server.request("POST", f"/api/conversations/{cid}/files", files={"other": ("a.txt", b"x")})
    assert (res.status_code, res.json()["code"]) == (400, "missing_file")

    res = _upload(server, cid, "big.bin", b"x" * (52_428 + 1))
    assert (res.status_code, res.json()["code"]) == (413, "file_too_large")
    res = _upload(server, cid, "huge.bin", b"x" * 300_000)  # past the multipart allowance: refused unread
    assert (res.status_code, res.json()["code"]) == (413, "file_too_large")
    assert _upload(server, cid, "fits.bin", b"x" * 52_428).status_code == 201

    res = _upload(server, cid, "bob.txt", b"from bob", token="tok-bob")
    assert (res.status_code, res.json()["code"]) == (404, "not_found")
    assert server.get(f"/api/conversations/{cid}/files", token="tok-bob").status_code == 404
    assert server.get(f"/api/conversations/{cid}/files/fits.bin", token="tok-bob").status_code == 404
    assert sorted(os.listdir(workspace)) == ["fits.bin"]  # nothing half-written is left

    # a link a command left in the workspace is neither listed nor followed
    (workspace / "passwd").symlink_to("/etc/passwd")
    (workspace / "folder").mkdir()
    names = [f["name"] for f in server.get(f"/api/conversations/{cid}/files").json()["data"]]
    assert names == ["fits.bin"]
    assert server.get(f"/api/conversations/{cid}/files/passwd").status_code == 404
    assert server.get(f"/api/conversations/{cid}/files/folder").status_code == 404
    res = server.get(f"/api/conversations/{cid}/files/..")
    assert res.status_code in (400, 404)


def test_an_upload_may_be_larger_than_max_request_bytes(make_server, llm):
    server = make_server(env={"UPLOAD_MAX_MB": "1", "MAX_REQUEST_BYTES": "65536"})
    cid = server.post("/api/conversations", {"title": "big"}).json()["conversation_id"]
    content = os.urandom(700_000)
    res = _upload(server, cid, "big.bin", content)
    assert res.status_code == 201, res.text
    assert server.get(f"/api/conversations/{cid}/files/big.bin").content == content
    res = _upload(server, cid, "too-big.bin", b"x" * (2**20 + 1))
    assert (res.status_code, res.json()["code"]) == (413, "file_too_large")
    # other bodies keep their limit
    res = server.post("/api/conversations", {"title": "x" * 70_000})
    assert (res.status_code, res.json()["code"]) == (413, "payload_too_large")


def test_an_upload_onto_a_folder_answers_409_and_names_are_nfc_without_bidi_or_control(files_server, llm):
    server = files_server
    cid = server.post("/api/conversations", {"title": "files"}).json()["conversation_id"]
    workspace = server.workspace(cid)
    (workspace / "made-by-agent").mkdir(parents=True)
    (workspace / "made-by-agent" / "keep.txt").write_text("kept")
    res = _upload(server, cid, "made-by-agent", b"over a folder")
    assert (res.status_code, res.json()["code"]) == (409, "name_is_folder"), res.text
    assert (workspace / "made-by-agent" / "keep.txt").read_text() == "kept"
    assert "Traceback" not in server.log_text()

    for name in ("report\u202etxt.exe", "zero\u200bwidth.txt", "tab\tname.txt", "line\u2028sep.txt"):
        res = _upload(server, cid, name, b"nope")
        assert (res.status_code, res.json()["code"]) == (400, "invalid_filename"), name
    decomposed = "cafe\u0301.txt"
    res = _upload(server, cid, decomposed, b"nfc")
    assert res.status_code == 201 and res.json()["name"] == "caf\u00e9.txt"
    assert server.get(f"/api/conversations/{cid}/files/{decomposed}").content == b"nfc"
    (workspace / "other\u0301.txt").write_bytes(b"made by a command, not NFC")
    (workspace / "evil\u202egnp.exe").write_bytes(b"made by a command, bidi")
    listed = [f["name"] for f in server.get(f"/api/conversations/{cid}/files").json()["data"]]
    assert listed == ["caf\u00e9.txt"]
    for name in listed:
        assert server.get(f"/api/conversations/{cid}/files/{name}").status_code == 200


def test_an_upload_past_the_workspace_quota_is_refused_where_a_poll_holds_it(make_server, llm):
    """WORKSPACE_QUOTA=poll: no file system refuses the write, so the upload itself must keep to what the
    quota has left (docs/API.md: 507 `workspace_full`, nothing stored); a file it replaces frees its room."""
    server = make_server(env={"WORKSPACE_QUOTA": "poll", "WORKSPACE_MAX_MB": "1", "UPLOAD_MAX_MB": "4"})
    cid = server.post("/api/conversations", {"title": "quota"}).json()["conversation_id"]
    workspace = server.workspace(cid)
    res = _upload(server, cid, "big.bin", b"x" * (2 * 2**20))
    assert (res.status_code, res.json().get("code")) == (507, "workspace_full"), res.text
    assert os.listdir(workspace) == []  # nothing stored
    assert _upload(server, cid, "first.bin", b"x" * 600_000).status_code == 201
    res = _upload(server, cid, "second.bin", b"x" * 600_000)
    assert (res.status_code, res.json().get("code")) == (507, "workspace_full"), res.text
    assert sorted(os.listdir(workspace)) == ["first.bin"]
    res = _upload(server, cid, "first.bin", b"y" * 600_000)  # replaces itself: fits
    assert res.status_code == 201, res.text
    assert server.get(f"/api/conversations/{cid}/files/first.bin").content == b"y" * 600_000


def test_uploads_at_once_into_one_workspace_keep_to_its_quota_together_where_a_poll_holds_it(make_server, llm):
    """Eight uploads of 600 kB at once into a workspace of 1 MB: one is stored, the others answer 507; each read
    the room the quota had left before any of them wrote, and all eight were stored."""
    server = make_server(env={"WORKSPACE_QUOTA": "poll", "WORKSPACE_MAX_MB": "1", "UPLOAD_MAX_MB": "4"})
    cid = server.post("/api/conversations", {"title": "quota"}).json()["conversation_id"]
    workspace = server.workspace(cid)
    workspace.mkdir(parents=True)
    for i in range(50_000):  # empty files: each read of the workspace's size takes a while, nothing of its room
        (workspace / f"e{i:05d}").touch()
    codes: list[int] = []
    threads = [threading.Thread(target=lambda n=n: codes.append(_upload(server, cid, f"f{n}.bin",
                                                                        b"x" * 600_000).status_code))
               for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(codes) == [201] + [507] * 7, codes
    assert len([name for name in os.listdir(workspace) if name.startswith("f")]) == 1


def _unread_by_server(server_port: int, client_port: int) -> int:
    """Bytes the server has not read yet from the client's connection (its socket's receive queue)."""
    for line in open("/proc/net/tcp").read().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].split(":")[1], 16) == server_port and int(fields[2].split(":")[1], 16) == client_port:
            return int(fields[4].split(":")[1], 16)
    raise AssertionError("no such connection")


def test_an_upload_that_outlives_its_conversations_delete_leaves_no_files(make_server, llm):
    """Alice deletes the conversation while her upload into it still comes in: the upload answers 404 and
    leaves no workspace (nor image) behind, which nothing would ever remove (docs/API.md, DELETE)."""
    server = make_server(env={"AUTH_TOKENS": TWO_USERS})
    cid = server.post("/api/conversations", {"title": "late"}, token="tok-alice").json()["conversation_id"]
    boundary = "upload-boundary"
    head = (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="late.bin"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n").encode()
    content, tail = b"x" * 2_000_000, f"\r\n--{boundary}--\r\n".encode()
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        conn.putrequest("POST", f"/api/conversations/{cid}/files")
        for name, value in (("Authorization", "Bearer tok-alice"), ("Content-Length", len(head + content + tail)),
                            ("Content-Type", f"multipart/form-data; boundary={boundary}")):
            conn.putheader(name, str(value))
        conn.endheaders()
        conn.send(head + content[:1_000_000])
        client_port = conn.sock.getsockname()[1]
        wait_until(lambda: _unread_by_server(server.port, client_port) == 0, 10,
                   what="the upload's handler reading its body")  # so past its check of the conversation
        res = server.request("DELETE", f"/api/conversations/{cid}", token="tok-alice")
        assert res.status_code == 204, res.text
        conn.send(content[1_000_000:] + tail)
        answer = conn.getresponse()
        assert (answer.status, json.loads(answer.read()).get("code")) == (404, "not_found")
    finally:
        conn.close()
    assert not server.workspace(cid).exists()
    assert not (server.data_dir / "workspace_images" / f"{cid}.ext4").exists()

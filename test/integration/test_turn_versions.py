"""Edit as a version of a turn over REST (docs/API.md, "Versions of a turn"): stored with its version marks,
answered by the master, and the model sees only the newest version of the turn."""

from __future__ import annotations

import threading

from modules.statuses import SendStatus, TaskStatus
from test.scripted_llm import text


def _chat(server, llm, message: str, reply: str, conversation_id: str | None = None) -> dict:
    llm.script(text(reply))
    sent = server.send(message, conversation_id)
    assert server.wait_task(sent["task_id"])["status"] == TaskStatus.SUCCEEDED
    return sent


def test_an_edit_is_a_new_version_the_model_sees_alone(auth_server, llm):
    first = _chat(auth_server, llm, "Name a colour", "Red.")
    cid = first["conversation_id"]
    _chat(auth_server, llm, "And a fruit", "Apple.", cid)
    url = f"/api/conversations/{cid}/messages/{first['message_id']}/edit"
    assert auth_server.post(url, {"message": "Name a shape"}, token="tok-bob").status_code == 404
    assert auth_server.post(f"/api/conversations/{cid}/messages/nope/edit", {"message": "x"}).status_code == 404
    assert auth_server.post(url, {"message": "   "}).status_code == 400

    llm.script(text("Circle."))
    res = auth_server.post(url, {"message": "Name a shape"})
    assert res.status_code == 202, res.text
    answer = res.json()
    assert answer["status"] == SendStatus.ROUTED and answer["target_agent"] == "MasterAgent"
    assert auth_server.wait_task(answer["task_id"])["status"] == TaskStatus.SUCCEEDED
    request = llm.agent_requests[-1].body["messages"]
    assert [m["content"] for m in request[1:]] == ["Name a shape"]  # the older version and what followed it left
    history = auth_server.get(f"/api/conversations/{cid}/messages").json()["data"]
    assert [m["content"] for m in history if m["role"] == "assistant"] == ["Red.", "Apple.", "Circle."]
    edit = next(m for m in history if m["message_id"] == answer["message_id"])
    assert edit["metadata"]["edit_of"] == first["message_id"]
    assert edit["metadata"]["version_of"] == first["message_id"]
    assert isinstance(edit["metadata"]["replaces_from_seq"], int)

    # an edit of the edit, and a regenerate of it, stay versions of the same turn
    llm.script(text("Square."))
    again = auth_server.post(f"/api/conversations/{cid}/messages/{answer['message_id']}/edit",
                             {"message": "Name a polygon"}).json()
    assert auth_server.wait_task(again["task_id"])["status"] == TaskStatus.SUCCEEDED
    llm.script(text("Hexagon."))
    regen = auth_server.post(f"/api/conversations/{cid}/regenerate").json()
    assert auth_server.wait_task(regen["task_id"])["status"] == TaskStatus.SUCCEEDED
    assert [m["content"] for m in llm.agent_requests[-1].body["messages"][1:]] == ["Name a polygon"]
    history = auth_server.get(f"/api/conversations/{cid}/messages").json()["data"]
    roots = {m["metadata"].get("version_of") for m in history if m["role"] == "user"} - {None}
    assert roots == {first["message_id"]}

    release = threading.Event()
    llm.script(text("Later.", wait=release))
    running = auth_server.post(f"/api/conversations/{cid}/messages/{first['message_id']}/edit",
                               {"message": "one more"}).json()
    try:
        res = auth_server.post(url, {"message": "while it runs"})
        assert (res.status_code, res.json()["code"]) == (409, "task_in_progress")
    finally:
        release.set()
    assert auth_server.wait_task(running["task_id"])["status"] == TaskStatus.SUCCEEDED

"""Pages of the conversation list and of a history (docs/API.md), through the real server."""

from __future__ import annotations

from test.conftest import TWO_USERS
from test.integration.helpers import FAILED_CALLS, all_conversations, busy_conversation, history


def _error(res) -> tuple[int, str]:
    return res.status_code, res.json()["code"]


def test_the_conversation_list_pages_past_its_200_newest_by_cursor(make_server, llm):
    server = make_server(env={"AUTH_TOKENS": TWO_USERS, "RATE_LIMIT_CONVERSATIONS_PER_MIN": "1000"})
    server.token = "tok-alice"
    created = [server.post("/api/conversations", {"title": f"trip {n}"}).json()["conversation_id"]
               for n in range(205)]
    newest_first = created[::-1]

    first = server.get("/api/conversations").json()  # as the UI and older clients ask: the 200 newest
    assert [c["conversation_id"] for c in first["data"]] == newest_first[:200] and first["next_cursor"]
    rest = server.get("/api/conversations", params={"before": first["next_cursor"]}).json()
    assert [c["conversation_id"] for c in rest["data"]] == newest_first[200:] and rest["next_cursor"] is None
    assert [c["conversation_id"] for c in all_conversations(server, limit=7)] == newest_first
    assert [c["title"] for c in all_conversations(server, q="TRIP 20", limit=3)] == [
        f"trip {n}" for n in (204, 203, 202, 201, 200, 20)]
    assert all_conversations(server, token="tok-bob") == []

    page = server.get("/api/conversations", params={"limit": 50}).json()  # meanwhile: one new, one touched
    added = server.post("/api/conversations", {"title": "new"}).json()["conversation_id"]
    touched = newest_first[120]
    assert server.request("PATCH", f"/api/conversations/{touched}", json={"title": "moved up"}).status_code == 200
    seen = [c["conversation_id"] for c in page["data"]]
    cursor = page["next_cursor"]
    while cursor:
        page = server.get("/api/conversations", params={"before": cursor, "limit": 50}).json()
        seen += [c["conversation_id"] for c in page["data"]]
        cursor = page["next_cursor"]
    assert seen == [cid for cid in newest_first if cid != touched]  # none twice, none that stayed skipped
    assert [c["conversation_id"] for c in server.get("/api/conversations", params={"limit": 2}).json()["data"]] \
        == [touched, added]

    for limit in ("0", "201", "-1", "ten", "1.5"):
        assert _error(server.get("/api/conversations", params={"limit": limit})) == (400, "invalid_limit"), limit
    for cursor in ("nope", "W10", "WzEsMl0", "x" * 1025, first["next_cursor"][:-3]):
        res = server.get("/api/conversations", params={"before": cursor})
        assert _error(res) == (400, "invalid_cursor"), cursor
        assert res.json()["error"].startswith("`before`: ")


def test_a_history_pages_backwards_from_any_of_its_messages(make_server, llm):
    server = make_server(env={"AUTH_TOKENS": TWO_USERS})
    server.token = "tok-alice"
    cid = busy_conversation(server, llm)
    whole = history(server, cid)
    assert len(whole) > FAILED_CALLS  # without parameters: the whole history, as always
    path = f"/api/conversations/{cid}/messages"

    latest = server.get(path, params={"limit": 5}).json()
    assert latest["display_name"] == "MasterAgent" and latest["data"] == whole[-5:]
    pages = [latest["data"]]
    while pages[-1]:
        pages.append(server.get(path, params={"before": pages[-1][0]["message_id"], "limit": 60}).json()["data"])
    assert [m for page in reversed(pages) for m in page] == whole
    before_default = server.get(path, params={"before": whole[-1]["message_id"]}).json()["data"]
    assert before_default == whole[-201:-1]  # `before` alone: the 200 before it
    assert server.get(path, params={"before": whole[0]["message_id"]}).json()["data"] == []

    sub_history = history(server, cid, "InfoAgent_1")
    res = server.get(path, params={"agent": "InfoAgent_1", "before": sub_history[-1]["message_id"], "limit": 1})
    assert res.json()["data"] == sub_history[-2:-1]
    for foreign in (sub_history[-1]["message_id"], "no-such-message"):  # not in the master's history
        assert _error(server.get(path, params={"before": foreign})) == (404, "not_found")
    res = server.get(path, params={"before": whole[3]["message_id"], "limit": 2}, token="tok-bob")
    assert _error(res) == (404, "not_found")
    for limit in ("0", "1001", "many"):
        assert _error(server.get(path, params={"limit": limit})) == (400, "invalid_limit"), limit
    assert _error(server.get(path, params={"before": "x" * 65})) == (400, "invalid_before")


def test_openapi_describes_the_pages(server):
    paths = server.get("/openapi.json").json()["paths"]
    for path in ("/api/conversations", "/api/conversations/{conversation_id}/messages"):
        names = {p["name"] for p in paths[path]["get"]["parameters"]}
        assert {"before", "limit"} <= names and "400" in paths[path]["get"]["responses"], path
    listing = server.get("/openapi.json").json()["components"]["schemas"]["ConversationList"]
    assert "next_cursor" in listing["properties"]

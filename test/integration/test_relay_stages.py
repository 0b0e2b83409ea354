"""The relay of bench/load.py with `--stages` makes the product's model traffic around a reply (issue 26): a routing
request before it (the reply request carries the user's message, as the product's agent gets it), and a suggestion
request after `task_complete`, whose questions it emits; without `--stages` the reply's request is its only one."""

from __future__ import annotations

import json

import pytest
import requests

from bench.streaming.targets import RELAY_LAUNCHER
from modules.event_catalogue import SuggestionsEvent, TaskCompleteEvent, TextChunkEvent
from modules.multi_agent.routing_stage import ROUTER
from test.conftest import wait_until
from test.integration.event_recorder import Recorder
from test.scripted_llm import STAGE_MARKERS, match_system, text

SUGGESTING = STAGE_MARKERS[3]


def _system(body: dict) -> str:
    return next((m["content"] for m in body["messages"] if m["role"] == "system"), "")


@pytest.mark.parametrize("stages", [True, False])
def test_the_staged_relay_routes_before_the_reply_and_suggests_after_it(make_server, llm, stages):
    llm.script(text(json.dumps({"query": "hello, rewritten", "agent": "MasterAgent"})), match=match_system(ROUTER))
    llm.script(text(json.dumps({"questions": ["and then?"]})), match=match_system(SUGGESTING))
    llm.script(text("the reply, in pieces", chunk_size=4))
    server = make_server(launcher=RELAY_LAUNCHER + (["--stages"] if stages else []))
    cid = requests.post(server.url + "/api/conversations", json={}, timeout=10).json()["conversation_id"]
    room = Recorder(server.url)
    try:
        room.join(cid)
        ack = room.client.call("send_message", {"conversation_id": cid, "message": "hello"}, timeout=10)
        assert ack["success"], ack
        last = SuggestionsEvent.TYPE if stages else TaskCompleteEvent.TYPE
        wait_until(lambda: any(kind == last for kind, _ in room.seen()), what=last)
        kinds = [kind for kind, _ in room.seen()]
    finally:
        room.client.disconnect()

    chunks = "".join(data["content"] for kind, data in room.seen() if kind == TextChunkEvent.TYPE)
    assert chunks == "the reply, in pieces"
    asked = [_system(r.body) for r in llm.requests]
    reply_request = next(r.body for r in llm.requests if not _system(r.body))
    if stages:
        assert len(asked) == 3 and ROUTER in asked[0] and SUGGESTING in asked[2], asked
        assert llm.requests[0].body["messages"][-1]["content"].endswith("Latest message: hello")
        assert reply_request["messages"][-1]["content"] == "hello"
        assert kinds.index(TaskCompleteEvent.TYPE) < kinds.index(SuggestionsEvent.TYPE)
        offered = next(data for kind, data in room.seen() if kind == SuggestionsEvent.TYPE)
        assert offered["questions"] == ["and then?"]
    else:
        assert asked == [""]
        assert reply_request["messages"][-1]["content"] == "hello"
        assert SuggestionsEvent.TYPE not in kinds

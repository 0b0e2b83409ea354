"""The real server fuzzed: schemathesis drives every REST operation `/openapi.json` describes, hypothesis
drives the Socket.IO events. No 5xx, answers as described, every event acknowledged, no task left running."""

from __future__ import annotations

import requests
import schemathesis
import socketio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from modules.statuses import CommandStatus
from test.conftest import wait_until
from test.integration.helpers import MASTER, all_conversations
from test.scripted_llm import text, tool_calls

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
REST_EXAMPLES_PER_OPERATION = 30
SOCKET_EXAMPLES_PER_EVENT = 50


def fuzz_settings(examples: int):
    return settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))


def assert_no_task_runs(server) -> None:
    """Every task of every conversation reaches a final status (bounded wait)."""
    conversations = all_conversations(server)

    def all_final():
        return all(not server.get(f"/api/tasks?conversation_id={c['conversation_id']}&status=active").json()["data"]
                   for c in conversations)
    wait_until(all_final, timeout=30, what="every task final")


def populated_conversation(server, llm) -> dict[str, str]:
    """Ids of real rows (a finished task, a sub-agent, a background command), so that fuzzed calls reach
    more than 404s."""
    llm.script(tool_calls(("create_sub_agent", {"role": "InfoAgent", "task": "look it up"}),
                          ("run_command", {"command": "echo fuzz", "run_in_background": True})), match=MASTER)
    sent = server.send("start some background work")
    cid = sent["conversation_id"]
    server.wait_task(sent["task_id"])
    assert_no_task_runs(server)
    sub_agents = server.get(f"/api/sub_agents?conversation_id={cid}").json()["data"]
    commands = wait_until(lambda: [c for c in server.get(f"/api/background_commands?conversation_id={cid}")
                                   .json()["data"] if c["status"] != CommandStatus.RUNNING], what="the command's end")
    return {"conversation_id": cid, "task_id": sent["task_id"], "agent_id": sub_agents[0]["agent_id"],
            "command_id": commands[0]["command_id"]}


def test_rest_api_answers_as_its_openapi_document_says(server, llm):
    llm.set_default(text("ok"))
    document = server.get("/openapi.json").json()
    assert document["openapi"].startswith("3.1") and "/api/tasks" in document["paths"]
    known = populated_conversation(server, llm)
    schema = schemathesis.openapi.from_url(server.url + "/openapi.json")
    session = requests.Session()
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == sum(len(methods) for methods in document["paths"].values())

    for operation in operations:
        parameters = document["paths"][operation.path][operation.method.lower()]["parameters"]
        fixed = {where: {p["name"]: known[p["name"]] for p in parameters if p["in"] == where and p["name"] in known}
                 for where in ("path", "query")}
        for strategy in (operation.as_strategy(),
                         operation.as_strategy(path_parameters=fixed["path"], query=fixed["query"])):
            @fuzz_settings(REST_EXAMPLES_PER_OPERATION)
            @given(case=strategy)
            def call(case):
                case.call_and_validate(base_url=server.url, session=session, checks=CHECKS)

            call()
    assert_no_task_runs(server)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3),
    max_leaves=6,
)
odd_ids = st.sampled_from(["", "a\x00b", "\ud800", "\udfff-x", "x" * 300, "MasterAgent"])


def test_socket_events_are_always_acknowledged(server, llm):
    llm.set_default(text("ok"))
    sent = server.send("a conversation to aim at")
    server.wait_task(sent["task_id"])
    ids = st.sampled_from([sent["conversation_id"], sent["task_id"]]) | odd_ids | st.text(max_size=40) | json_values
    payloads = {
        "join_conversation": st.fixed_dictionaries({}, optional={"conversation_id": ids}),
        "stop_task": st.fixed_dictionaries({}, optional={"task_id": ids}),
        "send_message": st.fixed_dictionaries(
            {"message": st.text(max_size=40) | json_values},
            optional={"conversation_id": ids, "client_message_id": ids, "question_id": ids}),
    }
    client = socketio.Client(reconnection=False)
    client.connect(server.url, wait_timeout=5)
    try:
        for event, payload in payloads.items():
            fuzz_event(client, event, st.tuples(payload) | st.tuples(json_values) | st.tuples(payload, json_values)
                       | st.just(()))
    finally:
        client.disconnect()
    assert_no_task_runs(server)


def fuzz_event(client: socketio.Client, event: str, arguments) -> None:
    """Send `event` with drawn arguments (none, one, or several); each call must be acknowledged."""
    @fuzz_settings(SOCKET_EXAMPLES_PER_EVENT)
    @given(args=arguments)
    def call(args):
        data = None if not args else args[0] if len(args) == 1 else args
        ack = client.call(event, data, timeout=10)
        assert isinstance(ack, dict), (event, args, ack)
        if ack.get("success") is not True:
            assert ack["success"] is False and ack["code"] and ack["status"] < 500, (event, args, ack)

    call()

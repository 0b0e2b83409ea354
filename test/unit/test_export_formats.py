"""The streamed export writes the bytes the whole-document export wrote (docs/API.md, `GET .../export`),
whatever the histories hold and however the pieces are gathered into chunks."""

from __future__ import annotations

import pytest

from modules.statuses import AgentState, MessageSource
from server.api import export_formats
from server.api.export_formats import AgentHistory, json_chunks, markdown_chunks
from test.export_reference import export_json, export_markdown

CONVERSATION = {"conversation_id": "c0ffee00-0000-4000-8000-000000000000", "title": "Trip \"to\" Lisbon ✓\n",
                "created_at": "2026-12-01T10:00:00Z", "updated_at": "2026-12-01T10:05:00.250000Z"}


def _agent(name: str, kind: str = "sub_agent") -> dict:
    return {"agent_id": f"id-{name}", "display_name": name, "role": name.split("_")[0], "kind": kind,
            "state": AgentState.IDLE, "parent_id": None if kind == "master" else "id-MasterAgent", "pending_count": 0}


def _message(n: int, role: str, content: str | None, **extra) -> dict:
    return {"message_id": f"m{n}", "role": role, "content": content, "tool_calls": None, "tool_call_id": None,
            "name": None, "metadata": {}, "agent_id": "a", "created_at": f"2026-12-01T10:00:{n:02d}Z", **extra}


CALL = [{"id": "call_1", "type": "function", "function": {"name": "run_command", "arguments": "{\"command\": \"ls\"}"}}]
MASTER = [_message(1, "user", "Wie spät ist es?\nÖffnungszeiten 😀"),
          _message(2, "assistant", None, tool_calls=CALL),
          _message(3, "tool", "a.txt\n", tool_call_id="call_1", name="run_command"),
          _message(4, "user", "[Background command x done]", metadata={"source": MessageSource.BACKGROUND_COMMAND}),
          _message(5, "assistant", "Done.  \n\n")]
SUB = [_message(6, "user", "find opening hours", metadata={"source": MessageSource.AGENT_MESSAGE}),
       _message(7, "tool", "{}", tool_call_id="call_2"),
       _message(8, "assistant", "Open 10:00-18:00 \t\n")]

CASES = {
    "several agents": [(_agent("MasterAgent", "master"), MASTER), (_agent("InfoAgent_1"), SUB)],
    "the last agent has no messages": [(_agent("MasterAgent", "master"), MASTER), (_agent("InfoAgent_1"), [])],
    "no messages at all": [(_agent("MasterAgent", "master"), [])],
    "white space only at the end": [(_agent("MasterAgent", "master"), [_message(1, "assistant", " \n \n")])],
    "no agents": [],
}


def _histories(agents: list[tuple[dict, list[dict]]]) -> list[AgentHistory]:
    return [AgentHistory(agent, iter(messages)) for agent, messages in agents]


def _document(agents: list[tuple[dict, list[dict]]]) -> dict:
    return {"conversation": CONVERSATION, "agents": [{"agent": a, "messages": m} for a, m in agents]}


@pytest.mark.parametrize("chunk_chars", [1, 100, export_formats.CHUNK_CHARS])
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_streamed_export_is_the_whole_documents_bytes(case, chunk_chars, monkeypatch):
    monkeypatch.setattr(export_formats, "CHUNK_CHARS", chunk_chars)
    agents = CASES[case]
    streamed_json = list(json_chunks(CONVERSATION, _histories(agents)))
    assert "".join(streamed_json) == export_json(_document(agents))
    streamed_md = list(markdown_chunks(CONVERSATION, _histories(agents), "2026-12-02T00:00:00Z"))
    assert "".join(streamed_md) == export_markdown(_document(agents), "2026-12-02T00:00:00Z")
    if chunk_chars == 1:
        assert len(streamed_json) > 2 * len(agents) and len(streamed_md) > 2 * len(agents)  # it streamed


def test_pieces_are_gathered_into_chunks_not_one_write_a_message():
    many = [(_agent("MasterAgent", "master"), [_message(n % 60, "user", "x" * 100) for n in range(2000)])]
    chunks = list(json_chunks(CONVERSATION, _histories(many)))
    size = export_formats.CHUNK_CHARS
    assert len(chunks) > 1 and all(size <= len(c) < size + 1000 for c in chunks[:-1])

"""The model's view of a long history (server/turns/context_window.py) against a real database: old tool
output shortened first, then the oldest span summarised once into a stored summary read in its place, the
newest messages verbatim, the stored history whole."""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import pytest

from modules.agents.profiles import load_profiles
from modules.config import Settings
from modules.context.budget import RefusedSizes
from modules.event_catalogue import ContextCompactedEvent
from modules.llm import ModelReply
from modules.llm.tokens import count_messages, count_tools
from modules.storage import conversations
from modules.storage import messages as message_store
from modules.storage import summaries as summary_store
from modules.storage.db import Database
from modules.storage.messages import MessageDraft
from modules.storage.users import get_or_create_user
from modules.tools.agent_tools import AGENT_TOOLS
from modules.tools.registry import ToolRegistry
from modules.tools.run_command import RUN_COMMAND
from server.turns.context_window import ContextTooLarge, build_model_messages
from server.turns.types import Turn

TOOLS = ToolRegistry([RUN_COMMAND, *AGENT_TOOLS])
PROFILES = load_profiles(None, {t.name for t in (RUN_COMMAND, *AGENT_TOOLS)})


class Summariser:
    label = "scripted"  # the endpoint's URL on the real model: requests are tagged with it (`producer_of`)

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.during = lambda: None  # runs inside the request, as if the user did something meanwhile
        self.contexts: list = []

    def bound(self, context):  # the runtime's model is metered: compaction binds its purpose
        self.contexts.append(context)
        return self

    def stream_chat(self, *, messages, tools=None, model=None, should_stop=lambda: False, **_):
        self.requests.append({"messages": messages, "model": model, "tools": tools})
        self.during()
        if should_stop():
            return ModelReply("- the user sa", [], "stopped")
        return ModelReply("- the user said: INSTRUCTION keep it short", [], "stop")


class Sender:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict]] = []

    def emit(self, event):
        self.events.append((event.TYPE, event.data()))


@pytest.fixture
def window(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'app.db'}")
    db.migrate()
    conv, master = conversations.create_conversation(db, get_or_create_user(db, "u").id, "t")
    model = Summariser()
    rt = SimpleNamespace(db=db, model=model, settings=Settings(llm_model="m", model_context_tokens=4000,
                                                               llm_model_compact="small-model"),
                         refused_sizes=RefusedSizes())

    def add(*drafts: MessageDraft):
        return message_store.append_messages(db, conv.id, master.id, list(drafts))

    turn = Turn(task_id="t1", conversation_id=conv.id, agent_id=master.id, display_name="MasterAgent",
                profile=PROFILES["MasterAgent"])

    def build(current_from: int = 10**6, **kw):
        turn.drained = [SimpleNamespace(seq=current_from)]
        sender = Sender()
        tools = TOOLS.definitions(list(turn.profile.tools))
        messages = build_model_messages(rt, turn, sender, tools, **kw)
        return messages, sender.events, count_messages(messages) + count_tools(tools)

    yield SimpleNamespace(db=db, agent=master, model=model, add=add, build=build, turn=turn, rt=rt)
    db.dispose()


def chat(i: int, words: int = 60) -> list[MessageDraft]:
    text = f"turn {i}: " + " ".join(f"w{j}" for j in range(words))
    return [MessageDraft(role="user", content=text), MessageDraft(role="assistant", content=f"reply {i}")]


def call(i: int, output: str) -> list[MessageDraft]:
    calls = [{"id": f"c{i}", "type": "function", "function": {"name": "run_command", "arguments": "{}"}}]
    return [MessageDraft(role="assistant", tool_calls=calls),
            MessageDraft(role="tool", content=json.dumps({"output": output}), tool_call_id=f"c{i}")]


def test_a_short_history_is_sent_whole_without_a_summary(window):
    window.add(*chat(1), *chat(2))
    messages, events, _ = window.build()
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant"]
    assert window.model.requests == [] and events == []


def test_old_command_output_is_shortened_first_and_then_no_summary_is_needed(window):
    window.add(MessageDraft(role="user", content="run it"), *call(1, "line,\n" * 3000), *chat(2, 10))
    messages, events, size = window.build()
    tool = next(m for m in messages if m["role"] == "tool")
    assert "characters omitted" in tool["content"] and size <= 3000
    assert window.model.requests == [] and events == []
    stored = [m for m in message_store.list_messages(window.db, window.agent.id) if m.role == "tool"]
    assert "characters omitted" not in stored[0].content  # the stored history stays whole


def test_a_long_history_is_summarised_once_and_then_read_from_the_summary_on(window):
    window.add(MessageDraft(role="user", content="INSTRUCTION keep it short"),
               *[d for i in range(1, 20) for d in chat(i)])
    messages, events, size = window.build()
    [request] = window.model.requests
    assert request["model"] == "small-model" and request["tools"] is None
    assert [c.purpose for c in window.model.contexts] == ["compaction"]  # metered as compaction
    assert "every instruction" in request["messages"][0]["content"]
    assert "INSTRUCTION keep it short" in request["messages"][1]["content"]
    assert "INSTRUCTION keep it short" in messages[0]["content"]  # the summary, in the system message
    assert messages[-1]["content"] == "reply 19" and messages[1]["role"] == "user"  # the newest, verbatim
    assert size <= 3000
    [(kind, data)] = events
    summary = summary_store.latest(window.db, window.agent.id)
    assert kind == ContextCompactedEvent.TYPE and data["summary_id"] == summary.summary_id
    assert data["tokens_after"] < data["tokens_before"] and data["summarised_messages"] == summary.through_seq + 1
    assert len(message_store.list_messages(window.db, window.agent.id)) == 39  # all still stored

    again, events, _ = window.build()
    assert again == messages and events == [] and len(window.model.requests) == 1  # no second summary


def test_the_current_turns_tool_calls_stay_with_their_results(window):
    first = window.add(MessageDraft(role="user", content="do the work"))[0]
    window.add(*[d for i in range(12) for d in call(i, "out " * 200)])
    messages, events, size = window.build(current_from=first.seq)
    assert events and size <= 3000
    tail = messages[1:]
    assert tail[0]["role"] == "assistant" and tail[-1]["role"] == "tool"
    for i, m in enumerate(tail):
        if m["role"] == "tool":
            assert tail[i - 1]["role"] == "assistant" and tail[i - 1]["tool_calls"][0]["id"] == m["tool_call_id"]


def test_a_newest_message_larger_than_the_window_cannot_be_sent(window):
    first = window.add(MessageDraft(role="user", content="x " * 4000))[0]
    with pytest.raises(ContextTooLarge, match="4000 tokens"):
        window.build(current_from=first.seq)


def test_a_deleted_conversation_takes_its_summaries_with_it(window):
    window.add(MessageDraft(role="user", content="INSTRUCTION keep it short"),
               *[d for i in range(1, 20) for d in chat(i)])
    window.build()
    assert summary_store.latest(window.db, window.agent.id) is not None
    conv_id = window.agent.conversation_id
    user_id = conversations.get_conversation(window.db, conv_id).user_id
    assert conversations.mark_deleted(window.db, conv_id, user_id)
    assert conversations.purge_conversation(window.db, conv_id)  # foreign keys on: summaries go first
    assert summary_store.latest(window.db, window.agent.id) is None


def test_a_summary_cut_short_by_stop_is_never_stored(window):
    window.add(MessageDraft(role="user", content="INSTRUCTION keep it short"),
               *[d for i in range(1, 20) for d in chat(i)])
    window.model.during = window.turn.stop_event.set
    _, events, _ = window.build()
    assert len(window.model.requests) == 1 and events == []
    assert summary_store.latest(window.db, window.agent.id) is None


def test_a_turns_next_request_reads_only_the_history_written_since_its_last(window, monkeypatch):
    window.add(*chat(1))
    window.build()
    window.add(*chat(2))
    asked: list[int] = []
    read = message_store.history_after
    monkeypatch.setattr(message_store, "history_after", lambda db, agent_id, after: asked.append(after) or
                        read(db, agent_id, after))
    messages, _, _ = window.build()
    assert asked == [1]  # after the two entries the first request read
    assert [m["content"] for m in messages[1:]] == ["turn 1: " + " ".join(f"w{j}" for j in range(60)), "reply 1",
                                                    "turn 2: " + " ".join(f"w{j}" for j in range(60)), "reply 2"]


def test_each_summary_request_fits_the_window_of_the_model_that_writes_it(window):
    # The agent's model has 40,000 tokens; LLM_MODEL_COMPACT (gpt-4) only 8,192, 2,048 of them for its answer.
    window.turn.profile = dataclasses.replace(PROFILES["MasterAgent"], model="agent-model", context_tokens=40_000)
    window.rt.settings = Settings(llm_model="m", llm_model_compact="gpt-4")
    window.add(MessageDraft(role="user", content="INSTRUCTION keep it short"),
               *[d for i in range(1, 60) for d in chat(i, 300)])
    _, events, _ = window.build()
    assert events and len(window.model.requests) > 1  # the span went in pieces
    assert all(count_messages(r["messages"]) <= 8_192 - 2_048 for r in window.model.requests)

"""Test doubles of the turn loop's collaborators (test/unit/test_turn_loop.py): a scripted model, tools that
record their calls, a sender and a room transport that keep what they were given."""

from __future__ import annotations

import json

from modules.context.view import producer_of
from modules.llm import ModelReply, ToolCall


def calls(*names: str) -> ModelReply:
    return ModelReply("", [ToolCall(f"c{i}-{n}", n, json.dumps({"n": i})) for i, n in enumerate(names)], "tool_calls")


class Model:
    """Replies in order; `during` runs inside the n-th call (0-based), as if something happened meanwhile."""

    label = "scripted"  # the endpoint's URL on the real model: replies are tagged with it (`producer_of`)

    def __init__(self, *replies, during=None):
        self.replies, self.during, self.requests, self.contexts = list(replies), during or {}, [], []

    def bound(self, context):
        self.contexts.append(context)
        return self

    def stream_chat(self, *, messages, tools=None, model=None, on_text, should_stop, on_reasoning=None):
        self.requests.append({"messages": messages, "tools": tools, "model": model, "stopped": should_stop()})
        if hook := self.during.get(len(self.requests) - 1):
            hook()
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        for i in range(0, len(reply.content), 3):
            on_text(reply.content[i:i + 3])
        return reply


class Tools:
    def __init__(self, during=None):
        self.ran, self.during, self.contexts = [], during or {}, []

    def definitions(self, names):
        return [{"type": "function", "function": {"name": n}} for n in names]

    def execute(self, name, arguments, ctx, allowed=None):
        self.ran.append((name, arguments, tuple(allowed or ())))
        self.contexts.append(ctx)
        if hook := self.during.get(len(self.ran) - 1):
            hook()
        return {"success": True, "ran": name} if name != "ask_user" else {"success": True, "ran": name, "said": "好的"}


class Sender:
    def __init__(self):
        self.events = []

    def emit(self, event):
        self.events.append((event.TYPE, event.data()))
        return len(self.events) - 1

    def emit_many(self, events):
        for event in events:
            self.emit(event)
        return 0

    def types(self):
        return [t for t, _ in self.events]


class Transport:
    """The room's events outside any task log (`pending_count`)."""

    def __init__(self):
        self.events = []

    def emit(self, event_type, data, room):
        self.events.append((event_type, data, room))


PRODUCER = producer_of(Model.label, "the-model")  # who wrote the replies of a flow whose LLM_MODEL is "the-model"

"""The `meta` of a stored or queued message: every key it may hold, declared once.

The database keeps it as a JSON object (`messages.meta`, `pending_messages.meta`); storage parses it with
`MessageMeta.load` and writes `dump()`, so the rest of the code reads fields, never dictionary keys. The
user-role messages' meta, less `source`, `visibility` and `starts_work`, is the `metadata` of their
`user_message` events and REST messages (docs/API.md). Keys this version does not know are kept as they are.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer

from modules.statuses import CommandStatus, Delivery, MessageSource, Route, TaskStatus, Visibility


class SetKeys(BaseModel):
    """A record whose JSON holds its set keys only: a field that is None is left out, on every edge (the
    stored meta, a REST message's `metadata`), and the UI's type has it optional (`sends_defaults`)."""

    sends_defaults: ClassVar[bool] = False

    @model_serializer(mode="wrap")
    def _set_keys_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return {key: value for key, value in handler(self).items() if value is not None}


class RoutedTo(SetKeys):
    """Where a user's held message went once routed (`GET /api/messages/<id>`)."""

    model_config = ConfigDict(frozen=True)

    route: Route | None = None
    delivery: Delivery | None = None
    task_id: str | None = None
    agent_id: str | None = None
    target_agent: str | None = None


class MessageMeta(SetKeys):
    """All optional: each kind of message sets its own (None: not set, and left out of the JSON)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    # Who wrote a user-role message and how the UI shows it; whether it started the agent's turn.
    source: MessageSource | None = None
    visibility: Visibility | None = None
    starts_work: bool | None = None
    # A queued message as its receiver read it: its queue type and sender.
    message_type: str | None = None
    from_agent: str | None = None
    question_id: str | None = None  # the question it asks or answers
    # A user's message: the id its client gave, how it was routed and why, and where it went.
    client_message_id: str | None = None
    route: Route | None = None
    rewritten_query: str | None = None
    route_reason: str | None = None
    routed: RoutedTo | None = None
    regenerate_of: str | None = None  # the user message a regeneration repeats
    # A new version of a user's turn (modules/context/versions.py): the turn's first message, the history
    # position of the version it replaces, and the message an edit changed.
    version_of: str | None = None
    replaces_from_seq: int | None = None
    edit_of: str | None = None
    # An assistant message: its task, its model's thinking, and how it was cut short.
    task_id: str | None = None
    reasoning: str | None = None
    reasoning_details: list[dict[str, Any]] | None = None  # OpenRouter's, sent back with the message's tool calls
    # The endpoint and model that wrote it (modules/context/view.py `producer_of`): what the provider asks to get
    # back (a call's `extra_content`, the thinking) goes back to them only.
    producer: str | None = None
    partial: bool | None = None
    stopped: bool | None = None
    truncated: bool | None = None
    filtered: bool | None = None
    error_code: str | None = None
    # A completion notice (a sub-agent's turn or a background command ended).
    auto_message_type: str | None = None
    sub_agent_notice: bool | None = None
    sub_agent_id: str | None = None
    background_command_notice: bool | None = None
    command_id: str | None = None
    status: TaskStatus | CommandStatus | None = None  # the sub-agent's turn's or the command's end
    finished_at: float | None = None

    @classmethod
    def load(cls, raw: dict[str, Any] | None) -> MessageMeta:
        """The meta of a stored JSON object (None for a row written without one)."""
        return cls.model_validate(raw or {})

    def dump(self) -> dict[str, Any]:
        """The JSON object to store: set keys only."""
        return self.model_dump(mode="json")

    def merged(self, **changes: Any) -> MessageMeta:
        """A copy with these keys set (checked like the constructor's)."""
        return MessageMeta.model_validate({**self.dump(), **changes})

    def event_metadata(self) -> dict[str, Any]:
        """The `metadata` of the message's `user_message` event: its meta less the three keys the event
        carries as fields of its own."""
        return {k: v for k, v in self.dump().items() if k not in ("source", "visibility", "starts_work")}

"""What each REST call (and the socket's `send_message`) accepts: bodies and query strings (API.md)."""

from __future__ import annotations

from datetime import date
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, StringConstraints, ValidationInfo
from pydantic_core import PydanticCustomError

from modules.config import Settings
from modules.storage.conversation_pages import ConversationCursor
from server.api.validation import NonBlankText, RequestModel, check_storable

DEFAULT_TITLE = "New conversation"
MAX_TITLE_CHARS = 200
MAX_OFFSET = 2**31 - 1
MAX_CONVERSATION_PAGE = 200  # also the default: a client that does not page sees the list it always saw
MAX_MESSAGE_PAGE = 1000
DEFAULT_MESSAGE_PAGE = 200


# Strings that can be stored, each with its length bounds (in the schema), checked before storability.
IdText = Annotated[str, StringConstraints(min_length=1, max_length=64), AfterValidator(check_storable)]
ClientMessageId = Annotated[str, StringConstraints(min_length=1, max_length=128), AfterValidator(check_storable)]
CursorText = Annotated[str, StringConstraints(min_length=1, max_length=1024), AfterValidator(check_storable)]
TitleText = Annotated[str, StringConstraints(min_length=0, max_length=MAX_TITLE_CHARS), AfterValidator(check_storable)]


def validation_context(settings: Settings) -> dict[str, Any]:
    """The limits that come from configuration rather than from the models."""
    return {"max_message_chars": settings.max_message_chars}


def _fits_message_limit(value: str, info: ValidationInfo) -> str:
    """`message_too_large` past MAX_MESSAGE_CHARS, a limit of the configuration (`validation_context`)."""
    limit = (info.context or {}).get("max_message_chars")
    if limit is not None and len(value) > limit:
        raise PydanticCustomError("message_too_large", "is longer than {limit} characters", {"limit": limit})
    return value


# A user's message: not blank, storable, and within MAX_MESSAGE_CHARS.
UserMessageText = Annotated[NonBlankText, AfterValidator(_fits_message_limit)]


class SendMessageBody(RequestModel):
    """`POST /api/tasks` and the socket's `send_message`."""

    message: UserMessageText = Field(
        description="the user's message; longer than MAX_MESSAGE_CHARS answers 413 `message_too_large`")
    conversation_id: IdText | None = Field(None, description="omitted: a new conversation")
    client_message_id: ClientMessageId | None = Field(
        None, description="a repeated id returns the first answer and stores nothing twice")
    question_id: IdText | None = Field(
        None, description="the `ask_user` question this answers; one no longer pending answers 409 `stale_question`")


class EditMessageBody(RequestModel):
    """`POST /api/conversations/<id>/messages/<message_id>/edit`."""

    message: UserMessageText = Field(description="the new text; longer than MAX_MESSAGE_CHARS answers 413")


class CreateConversationBody(RequestModel):
    """`POST /api/conversations`; the body may be left out."""

    title: TitleText = DEFAULT_TITLE


class ConversationQuery(RequestModel):
    """The conversation whose tasks, sub-agents or background commands are listed."""

    error_codes = {"conversation_id": "missing_conversation_id"}
    conversation_id: str = Field(min_length=1)


class TaskListQuery(ConversationQuery):
    status: Literal["", "active"] | None = Field(None, description="`active`: only pending and running tasks")


class TaskEventsQuery(RequestModel):
    error_codes = {"from": "invalid_offset"}
    offset: int = Field(0, ge=0, le=MAX_OFFSET, alias="from",
                        description="index of the first event to return (a previous answer's `next_offset`)")


class MessagesQuery(RequestModel):
    agent: str | None = Field(None, description="agent id or display name; default: the master")


class MessagePageQuery(MessagesQuery):
    """`GET .../messages`: without `before` and `limit`, the whole history (as it always was)."""

    before: IdText | None = Field(
        None, description="a `message_id` of the agent's history: the messages just before it (one not in it: 404)")
    limit: int | None = Field(
        None, ge=1, le=MAX_MESSAGE_PAGE, description=f"messages per page, 1 to {MAX_MESSAGE_PAGE:,}; alone: the "
                                                     f"latest; with `before` its default is {DEFAULT_MESSAGE_PAGE}")


def _strip(value: str) -> str:
    return value.strip()


class RenameConversationBody(RequestModel):
    """`PATCH /api/conversations/<id>`: the new title, 1 to 200 characters once stripped."""

    title: Annotated[str, StringConstraints(min_length=1), AfterValidator(check_storable), AfterValidator(_strip),
                     StringConstraints(min_length=1, max_length=MAX_TITLE_CHARS)] = Field(
        description="1 to 200 characters after stripping white space")


def _conversation_cursor(value: str) -> str:
    try:
        ConversationCursor.decode(value)
    except ValueError:
        raise PydanticCustomError("invalid_cursor", "is not a `next_cursor` of this list") from None
    return value


class ConversationSearchQuery(RequestModel):
    """`GET /api/conversations`: one page of the caller's conversations, newest first."""

    error_codes = {"before": "invalid_cursor"}
    q: TitleText | None = Field(
        None, description="only conversations whose title or a user's or agent's message contains this text "
                          "(case-insensitive)")
    limit: int = Field(MAX_CONVERSATION_PAGE, ge=1, le=MAX_CONVERSATION_PAGE,
                       description=f"conversations per page, 1 to {MAX_CONVERSATION_PAGE}")
    before: Annotated[CursorText, AfterValidator(_conversation_cursor)] | None = Field(
        None, description="the `next_cursor` of the page before: the conversations after it")


class ExportQuery(RequestModel):
    format: Literal["md", "json"] = Field("md", description="`md` (Markdown) or `json`")


class UsageQuery(RequestModel):
    """`GET /api/usage`: the caller's usage by UTC day, from one day to another (both included)."""

    error_codes = {"from": "invalid_range", "to": "invalid_range"}
    start: date | None = Field(None, alias="from", description="first UTC day, `YYYY-MM-DD` (default: 29 days "
                                                               "before `to`)")
    end: date | None = Field(None, alias="to", description="last UTC day, `YYYY-MM-DD` (default: today)")
class FileListQuery(RequestModel):
    """`GET /api/conversations/<id>/files`: one page of the workspace's files."""

    limit: int = Field(200, ge=1, le=1000, description="names per page, 1 to 1,000")
    cursor: CursorText | None = Field(
        None, description="the `next_cursor` of the page before: names after it")

"""`@endpoint`: a REST handler's request and response models, used both to run it and to describe it.

The decorator validates the body and the query string with the declared models before the handler
runs, and sends the handler's answer only when it is the model declared for its status; the OpenAPI
document (server/api/openapi.py) is assembled from the same declarations.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from flask import Response, jsonify, request
from flask.typing import ResponseReturnValue
from pydantic import BaseModel

from server.api.context import current_user_id, json_body, runtime
from server.api.request_models import validation_context
from server.api.response_models import ErrorBody
from server.api.validation import RequestModel, validated, wire

# Statuses every operation may answer: 401 when AUTH_TOKENS are set and the token is missing or unknown,
# 403 when they are not and the Host header is not one of the server's names.
COMMON_ERRORS = (401, 403, 503)  # 503: `database_unavailable` (README, "During an outage")
# ... and every operation with a body: malformed JSON, or a body larger than MAX_REQUEST_BYTES.
BODY_ERRORS = (400, 413)


@dataclass(frozen=True)
class Operation:
    summary: str
    description: str
    body: type[RequestModel] | None
    body_required: bool
    query: type[RequestModel] | None
    responses: dict[int, type[BaseModel]] = field(default_factory=dict)
    files: dict[int, str] = field(default_factory=dict)  # status -> media type of a file ("": no body)
    upload: str | None = None  # the multipart form field of an uploaded file


# What a handler answers: its model, (model, status), or a file `Response`.
Handler = Callable[..., BaseModel | tuple[BaseModel, int] | Response]


class ApiView(Protocol):
    """The Flask view `@endpoint` makes, carrying the operation server/api/openapi.py describes."""

    api_operation: Operation

    def __call__(self, **path_args: Any) -> ResponseReturnValue: ...


def endpoint(responses: dict[int, type[BaseModel]], *, errors: tuple[int, ...] = (),
             body: type[RequestModel] | None = None, body_required: bool = True,
             query: type[RequestModel] | None = None, files: dict[int, str] | None = None,
             upload: str | None = None) -> Callable[[Handler], ApiView]:
    """Declare a handler's models. It receives the caller's `user_id` (authenticated first) and the
    validated `body` and `query` as keyword arguments, and returns a response model or `(model, status)`;
    `errors` are the statuses it answers with ErrorBody. `files`: statuses it answers with a file (a Flask
    `Response` of that media type, e.g. a download); `upload`: the multipart field it reads a file from."""
    statuses = set(errors) | set(COMMON_ERRORS) | (set(BODY_ERRORS) if body else set())
    declared: dict[int, type[BaseModel]] = {**{status: ErrorBody for status in statuses}, **responses}

    def decorate(handler: Handler) -> ApiView:
        summary, _, description = (inspect.getdoc(handler) or handler.__name__).partition("\n")
        operation = Operation(summary.strip(), description.strip(), body, body_required, query, declared,
                              dict(files or {}), upload)

        @functools.wraps(handler)
        def view(**path_args: Any) -> ResponseReturnValue:
            kwargs = {**path_args, "user_id": current_user_id()}
            context = validation_context(runtime().settings)
            if body is not None:
                kwargs["body"] = validated(body, json_body(required=body_required), context=context)
            if query is not None:
                kwargs["query"] = validated(query, request.args.to_dict(), context=context)
            answer = handler(**kwargs)
            if isinstance(answer, Response) and answer.status_code in operation.files:
                return answer
            model, status = answer if isinstance(answer, tuple) else (answer, 200)
            if isinstance(model, Response) or type(model) is not declared.get(status):
                raise TypeError(f"{handler.__name__} answered {status} with {type(model).__name__}, "
                                f"not its declared {getattr(declared.get(status), '__name__', None)}")
            return jsonify(wire(model)), status

        api_view = cast(ApiView, view)  # a function attribute, which mypy does not model
        api_view.api_operation = operation
        return api_view

    return decorate

"""One error shape for every failure: `{"success": false, "error", "code"}` with a 4xx/5xx status."""

from __future__ import annotations

import logging
from typing import Any

from flask import Flask, Response, jsonify
from werkzeug.exceptions import HTTPException

from modules.domain_errors import Conflict, DomainError, NotFound, OverBudget, RateLimited, Unauthorized

log = logging.getLogger(__name__)


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, *, details: dict[str, Any] | None = None,
                 retry_after_s: int | None = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details: dict[str, Any] = details or {}  # more fields of the body (`budget_exceeded`: `resets_at`)
        self.retry_after_s = retry_after_s  # sent as `Retry-After` (and `retry_after_s` in the body)

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"success": False, "error": self.message, "code": self.code, **self.details}
        if self.retry_after_s is not None:
            body["retry_after_s"] = self.retry_after_s
        return body


# The status of each kind of domain refusal, for both edges: REST's error handler below and the socket's
# acknowledgements (server/socket_handlers.py) turn a DomainError into an ApiError here and nowhere else.
_DOMAIN_STATUS: tuple[tuple[type[DomainError], int], ...] = (
    (Unauthorized, 401), (NotFound, 404), (Conflict, 409), (RateLimited, 429), (OverBudget, 429))


def api_error(err: DomainError) -> ApiError:
    """The edge's answer to a domain refusal: its status by kind (400 for a kind the table does not name), its
    body's other fields; a rate limit's wait is also the `Retry-After` header."""
    status = next((status for kind, status in _DOMAIN_STATUS if isinstance(err, kind)), 400)
    if isinstance(err, RateLimited):
        return ApiError(status, err.code, err.message, retry_after_s=err.retry_after_s)
    return ApiError(status, err.code, err.message, details=err.details())


def not_found(what: str = "resource") -> ApiError:
    return ApiError(404, "not_found", f"{what} not found")


_HTTP_CODES = {
    400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
    405: "method_not_allowed", 409: "conflict", 413: "payload_too_large", 415: "unsupported_media_type",
}


def register_error_handlers(app: Flask) -> None:
    @app.errorhandler(ApiError)
    def _api_error(err: ApiError) -> tuple[Response, int, dict[str, str]]:
        headers = {"Retry-After": str(err.retry_after_s)} if err.retry_after_s is not None else {}
        return jsonify(err.body()), err.status, headers

    @app.errorhandler(DomainError)
    def _domain_error(err: DomainError) -> tuple[Response, int, dict[str, str]]:
        return _api_error(api_error(err))

    @app.errorhandler(HTTPException)
    def _http_error(err: HTTPException) -> tuple[Response, int]:
        status = err.code or 500
        code = _HTTP_CODES.get(status, "http_error")
        message = err.description or err.name
        if status == 413:
            message = "request body is too large"
        return jsonify({"success": False, "error": message, "code": code}), status

    @app.errorhandler(Exception)
    def _unexpected(err: Exception) -> tuple[Response, int]:
        log.exception("unhandled error")
        return jsonify({"success": False, "error": "internal server error", "code": "internal_error"}), 500

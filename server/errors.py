"""One error shape for every failure: `{"success": false, "error", "code"}` with a 4xx/5xx status."""

from __future__ import annotations

import logging
from typing import Any

from flask import Flask, Response, jsonify
from werkzeug.exceptions import HTTPException

log = logging.getLogger(__name__)


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def body(self) -> dict[str, Any]:
        return {"success": False, "error": self.message, "code": self.code}


def not_found(what: str = "resource") -> ApiError:
    return ApiError(404, "not_found", f"{what} not found")


_HTTP_CODES = {
    400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
    405: "method_not_allowed", 409: "conflict", 413: "payload_too_large", 415: "unsupported_media_type",
}


def register_error_handlers(app: Flask) -> None:
    @app.errorhandler(ApiError)
    def _api_error(err: ApiError) -> tuple[Response, int]:
        return jsonify(err.body()), err.status

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

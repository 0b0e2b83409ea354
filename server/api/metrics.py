"""`GET /metrics`: this process's metrics in Prometheus' text format (docs/API.md, "Metrics").

With AUTH_TOKENS set it wants `Authorization: Bearer <METRICS_TOKEN>` (no user's token: the figures span
every user), and without METRICS_TOKEN it answers no one; a loopback server without tokens serves it to
any local caller, as it serves everything else.
"""

from __future__ import annotations

import hmac

from flask import Blueprint, Response, request
from prometheus_client import CONTENT_TYPE_LATEST

from server.api.context import runtime
from server.auth import bearer_token
from server.errors import ApiError

bp = Blueprint("metrics", __name__)


@bp.get("/metrics")
def metrics() -> Response:
    rt = runtime()
    wanted = rt.settings.metrics_token
    if rt.settings.auth_required or wanted:
        given = bearer_token(request.headers.get("Authorization"))
        if not wanted or given is None or not hmac.compare_digest(given.encode(), wanted.encode()):
            raise ApiError(401, "unauthorized", "/metrics wants Authorization: Bearer <METRICS_TOKEN>")
    return Response(rt.metrics.exposition(), mimetype=CONTENT_TYPE_LATEST.split(";")[0],
                    headers={"Content-Type": CONTENT_TYPE_LATEST})

"""`/healthz`: is the process up, does the database answer (within a second), which model serves.

With AUTH_TOKENS set, only a caller with a valid token learns which model endpoint serves; without
them the page's demo banner reads `demo_model`, and its example chips `examples`.
"""

from __future__ import annotations

from flask import Blueprint, Response, current_app, jsonify, request

from modules.llm.demo_model import EXAMPLES
from server.api.context import runtime
from server.auth import Authenticator, bearer_token

bp = Blueprint("health", __name__)

PROBE_TIMEOUT_S = 0.8


@bp.get("/healthz")
def healthz() -> tuple[Response, int]:
    rt = runtime()
    db_ok = rt.db.ping(PROBE_TIMEOUT_S)
    body = {"ok": db_ok, "database": rt.db.dialect if db_ok else "unavailable"}
    auth: Authenticator = current_app.extensions["chat_auth"]
    if not rt.settings.auth_required or auth.knows(bearer_token(request.headers.get("Authorization"))):
        body.update(model=rt.model.label, demo_model=rt.settings.uses_demo_model)
        if rt.settings.uses_demo_model:
            body["examples"] = list(EXAMPLES)  # the phrases the offline demo model shows the team with
    return jsonify(body), 200 if db_ok else 503

"""`/healthz`: is the process up, is the database reachable, which model serves."""

from __future__ import annotations

from flask import Blueprint, jsonify

from server.api.context import runtime

bp = Blueprint("health", __name__)


@bp.get("/healthz")
def healthz():
    rt = runtime()
    db_ok = rt.db.ping()
    body = {"ok": db_ok, "database": rt.db.dialect if db_ok else "unreachable", "model": rt.model.label,
            "demo_model": rt.settings.uses_demo_model}
    return jsonify(body), 200 if db_ok else 503

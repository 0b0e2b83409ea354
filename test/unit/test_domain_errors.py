"""A domain refusal reaches clients as its code with the status of its kind, mapped at the edge only."""

from __future__ import annotations

from flask import Flask

from modules.domain_errors import Conflict, DomainError, NotFound, OverBudget, RateLimited, Unauthorized
from modules.multi_agent.user_questions import StaleQuestion
from modules.usage.budgets import DAY, TOKENS, Budget, BudgetExceeded
from server.errors import api_error, register_error_handlers


def test_a_stale_question_names_the_open_ones_or_none():
    assert StaleQuestion("q_9", ["q_1", "q_2"]).message == "question q_9 is not pending; open questions: q_1, q_2"
    assert StaleQuestion("q_9", []).message == "question q_9 is not pending"


def test_each_kind_of_refusal_has_its_status_and_keeps_its_code():
    err = api_error(StaleQuestion("q_9", []))
    assert (err.status, err.code, err.message) == (409, "stale_question", "question q_9 is not pending")
    assert api_error(Conflict("task_not_running", "ended")).status == 409
    assert api_error(DomainError("refused", "no")).status == 400
    assert (api_error(NotFound("conversation")).status, api_error(NotFound("conversation")).body()) == (
        404, {"success": False, "code": "not_found", "error": "conversation not found"})
    assert (api_error(Unauthorized("unknown token")).status, api_error(Unauthorized("x")).code) == (401, "unauthorized")


def test_the_limits_refusals_keep_their_bodies_fields():
    limited = api_error(RateLimited("more than 3 sends a minute", 7))
    assert (limited.status, limited.retry_after_s) == (429, 7)
    assert limited.body() == {"success": False, "code": "rate_limited", "error": "more than 3 sends a minute",
                              "retry_after_s": 7}
    over = api_error(OverBudget(BudgetExceeded(Budget(TOKENS, DAY, 100), used=120, resets_at=86400.0)))
    assert (over.status, over.code, over.retry_after_s) == (429, "budget_exceeded", None)
    assert {k: v for k, v in over.body().items() if k != "error"} == {
        "success": False, "code": "budget_exceeded", "resets_at": 86400.0,
        "budget": {"kind": "tokens", "period": "day", "limit": 100, "used": 120}}


def test_rest_answers_a_domain_refusal_with_the_error_shape():
    app = Flask(__name__)
    register_error_handlers(app)

    @app.get("/refuse")
    def refuse():
        raise StaleQuestion("q_9", ["q_1"])

    @app.get("/limited")
    def limited():
        raise RateLimited("slow down", 3)

    assert app.test_client().get("/limited").headers["Retry-After"] == "3"
    reply = app.test_client().get("/refuse")
    assert reply.status_code == 409
    assert reply.get_json() == {"success": False, "code": "stale_question",
                                "error": "question q_9 is not pending; open questions: q_1"}

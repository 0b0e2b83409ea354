"""A domain refusal reaches clients as its code with the status of its kind, mapped at the edge only."""

from __future__ import annotations

from flask import Flask

from modules.domain_errors import Conflict, DomainError
from modules.multi_agent.user_questions import StaleQuestion
from server.errors import api_error, register_error_handlers


def test_a_stale_question_names_the_open_ones_or_none():
    assert StaleQuestion("q_9", ["q_1", "q_2"]).message == "question q_9 is not pending; open questions: q_1, q_2"
    assert StaleQuestion("q_9", []).message == "question q_9 is not pending"


def test_each_kind_of_refusal_has_its_status_and_keeps_its_code():
    err = api_error(StaleQuestion("q_9", []))
    assert (err.status, err.code, err.message) == (409, "stale_question", "question q_9 is not pending")
    assert api_error(Conflict("task_not_running", "ended")).status == 409
    assert api_error(DomainError("refused", "no")).status == 400


def test_rest_answers_a_domain_refusal_with_the_error_shape():
    app = Flask(__name__)
    register_error_handlers(app)

    @app.get("/refuse")
    def refuse():
        raise StaleQuestion("q_9", ["q_1"])

    reply = app.test_client().get("/refuse")
    assert reply.status_code == 409
    assert reply.get_json() == {"success": False, "code": "stale_question",
                                "error": "question q_9 is not pending; open questions: q_1"}

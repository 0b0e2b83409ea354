"""/healthz: what it tells whom."""

from __future__ import annotations

import requests


def test_with_auth_tokens_only_a_caller_with_a_valid_token_learns_the_model_endpoint(make_server, llm):
    server = make_server(env={"AUTH_TOKENS": "alice:secret-a"})
    anonymous = requests.get(server.url + "/healthz", timeout=5).json()
    assert anonymous == {"ok": True, "database": "sqlite"}
    wrong = requests.get(server.url + "/healthz", headers={"Authorization": "Bearer nope"}, timeout=5).json()
    assert "model" not in wrong and "demo_model" not in wrong
    known = requests.get(server.url + "/healthz", headers={"Authorization": "Bearer secret-a"}, timeout=5).json()
    assert known["model"] == llm.base_url and known["demo_model"] is False


def test_without_auth_tokens_the_page_still_learns_about_the_demo_model(make_server):
    server = make_server(env={"OPENAI_API_KEY": ""})
    body = requests.get(server.url + "/healthz", timeout=5).json()
    assert body["demo_model"] is True and body["model"] == "demo"

"""Safe history (issue 27): Edit and Regenerate make versions of one turn with a ‹ 1/2 › switcher; the older
version stays readable, the model sees only the newest, and an export has no hidden copy of a message."""

from __future__ import annotations

from playwright.sync_api import expect

from test.browser.helpers import assistant, conversation_id, send
from test.scripted_llm import match_system, text

MASTER = match_system("You are MasterAgent")


def _last_master_messages(llm) -> list[dict]:
    return [r for r in llm.requests if MASTER(r.body)][-1].body["messages"]


def _said(messages: list[dict]) -> list[tuple[str, str]]:
    return [(m["role"], m.get("content") or "") for m in messages if m["role"] in ("user", "assistant")]


def test_an_edit_of_an_earlier_turn_is_a_version_and_the_model_sees_only_it(page, ui_server, llm):
    llm.script(text("Answer one."), text("Answer two."), text("Answer three."), match=MASTER)
    send(page, "first question")
    expect(assistant(page).last.get_by_test_id("assistant-text")).to_have_text("Answer one.")
    send(page, "second question")
    expect(assistant(page).last.get_by_test_id("assistant-text")).to_have_text("Answer two.")
    users = page.get_by_test_id("user-message")
    users.first.get_by_test_id("edit-message").click()  # any turn, not only the last
    box = page.get_by_test_id("message-input")
    expect(box).to_have_value("first question")
    expect(page.get_by_test_id("editing-banner")).to_be_visible()
    box.fill("first question, edited")
    box.press("Enter")
    expect(assistant(page).get_by_test_id("assistant-text")).to_have_text(["Answer three."])
    expect(users.get_by_test_id("user-text")).to_have_text(["first question, edited"])
    expect(users.get_by_test_id("version-label")).to_have_text("2/2")
    assert _said(_last_master_messages(llm)) == [("user", "first question, edited")]

    # the older version is one click away, whole, with the turn that followed it; it is read, not edited
    page.get_by_test_id("version-prev").click()
    expect(users.get_by_test_id("user-text")).to_have_text(["first question", "second question"])
    expect(assistant(page).get_by_test_id("assistant-text")).to_have_text(["Answer one.", "Answer two."])
    expect(page.get_by_test_id("version-label")).to_have_text("1/2")
    expect(page.get_by_test_id("edit-message")).to_have_count(0)
    expect(page.get_by_test_id("regenerate")).to_have_count(0)

    page.reload()  # the newest version again, from the stored history
    expect(page.get_by_test_id("version-label")).to_have_text("2/2")
    expect(assistant(page).get_by_test_id("assistant-text")).to_have_text(["Answer three."])


def test_regenerate_is_a_version_and_an_export_has_no_hidden_copy(page, ui_server, llm):
    llm.script(text("Old answer."), text("New answer."), match=MASTER)
    send(page, "tell me once")
    expect(assistant(page)).to_have_attribute("data-done", "true")
    assistant(page).get_by_test_id("regenerate").click()
    expect(assistant(page).get_by_test_id("assistant-text")).to_have_text(["New answer."])
    expect(page.get_by_test_id("version-label")).to_have_text("2/2")
    assert _said(_last_master_messages(llm)) == [("user", "tell me once")]  # the old answer left the context
    page.get_by_test_id("version-prev").click()
    expect(assistant(page).get_by_test_id("assistant-text")).to_have_text(["Old answer."])
    expect(page.get_by_test_id("user-message").get_by_test_id("user-text")).to_have_text(["tell me once"])
    page.get_by_test_id("version-next").click()
    expect(assistant(page).get_by_test_id("assistant-text")).to_have_text(["New answer."])

    cid = conversation_id(page)
    exported = ui_server.get(f"/api/conversations/{cid}/export?format=json").json()
    master = exported["agents"][0]["messages"]
    assert [m["content"] for m in master if m["role"] == "user"] == ["tell me once"]
    assert not [m for m in master if m["metadata"].get("regenerate_of")]
    markdown = ui_server.get(f"/api/conversations/{cid}/export?format=md").text
    assert markdown.count("**User**") == 1

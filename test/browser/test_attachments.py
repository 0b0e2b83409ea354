"""Attachments (issue 27): files picked, pasted or dropped are uploaded into the workspace and show as chips in
the composer (removable before the send) and on the sent message, and the agent is told which files came
with the message: the text its model reads names their workspace paths."""

from __future__ import annotations

from playwright.sync_api import expect

from test.browser.helpers import assistant, conversation_id, send
from test.scripted_llm import match_system, text

MASTER = match_system("You are MasterAgent")
PNG = [137, 80, 78, 71, 13, 10, 26, 10, 0, 0, 0, 13, 73, 72, 68, 82]

# A paste or a drop as the browser makes them: a DataTransfer with a file in it.
PASTE = """([bytes, where, name]) => {
  const dt = new DataTransfer();
  dt.items.add(new File([new Uint8Array(bytes)], name, { type: "image/png" }));
  const target = document.querySelector(where === "paste" ? "[data-testid=message-input]" : "[data-testid=chat]");
  const ev = where === "paste"
    ? new ClipboardEvent("paste", { clipboardData: dt, bubbles: true, cancelable: true })
    : new DragEvent("drop", { dataTransfer: dt, bubbles: true, cancelable: true });
  target.dispatchEvent(ev);
}"""


def _user_text_seen(llm) -> str:
    return [r for r in llm.requests if MASTER(r.body)][-1].body["messages"][-1]["content"]


def test_picked_files_are_chips_and_the_agent_is_told_their_paths(page, ui_server, llm, tmp_path):
    llm.script(text("Ready."), text("Read it."), match=MASTER)
    send(page, "I will send files")
    expect(assistant(page)).to_have_attribute("data-done", "true")
    notes, extra = tmp_path / "notes.txt", tmp_path / "extra.csv"
    notes.write_text("hello\n")
    extra.write_text("a,b\n")
    page.get_by_test_id("file-input").set_input_files([str(notes), str(extra)])
    chips = page.get_by_test_id("composer-attachments").get_by_test_id("attachment-chip")
    expect(chips).to_have_count(2)
    chips.filter(has_text="extra.csv").get_by_test_id("remove-attachment").click()  # not for this message
    expect(chips).to_have_count(1)
    expect(chips).to_have_attribute("data-name", "notes.txt")

    send(page, "summarise the notes")
    expect(page.get_by_test_id("composer-attachments")).to_have_count(0)  # the chips went with the message
    sent = page.get_by_test_id("user-message").last
    expect(sent.get_by_test_id("user-text")).to_have_text("summarise the notes")
    expect(sent.get_by_test_id("message-attachment")).to_have_text(["notes.txt"])
    expect(assistant(page).last.get_by_test_id("assistant-text")).to_have_text("Read it.")
    seen = _user_text_seen(llm)
    assert seen.startswith("summarise the notes")
    assert "`/workspace/notes.txt`" in seen and "extra.csv" not in seen

    page.reload()  # from the stored history: the chip again, not the line naming the file
    sent = page.get_by_test_id("user-message").last
    expect(sent.get_by_test_id("message-attachment")).to_have_text(["notes.txt"])
    expect(sent.get_by_test_id("user-text")).to_have_text("summarise the notes")


def test_a_pasted_image_and_a_dropped_file_are_uploaded(page, ui_server, llm):
    llm.script(text("Ready."), match=MASTER)
    send(page, "I will paste a picture")
    expect(assistant(page)).to_have_attribute("data-done", "true")
    cid = conversation_id(page)
    page.evaluate(PASTE, [PNG, "paste", "image.png"])  # what the clipboard calls every image
    chips = page.get_by_test_id("attachment-chip")
    expect(chips).to_have_count(1)
    page.evaluate(PASTE, [PNG, "drop", "diagram.png"])
    expect(chips).to_have_count(2)
    names = [c.get_attribute("data-name") for c in chips.all()]
    assert names[0].startswith("pasted-") and names[0].endswith(".png") and names[1] == "diagram.png", names
    stored = {f["name"]: f["size"] for f in ui_server.get(f"/api/conversations/{cid}/files").json()["data"]}
    assert all(stored.get(n) == len(PNG) for n in names), stored
    expect(page.get_by_test_id("message-input")).to_have_value("")  # a pasted file is not pasted as text

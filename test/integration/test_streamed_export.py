"""The export streams (docs/API.md, `GET .../export`): chunked, read from the database in batches, and byte for
byte what the whole document rendered at once made, through the real server."""

from __future__ import annotations

import re

from test.export_reference import document_from_api, export_json, export_markdown
from test.integration.helpers import FAILED_CALLS, busy_conversation


def test_the_export_streams_the_bytes_the_whole_document_made(server, llm):
    cid = busy_conversation(server, llm)
    document = document_from_api(server, cid)
    assert [len(entry["messages"]) for entry in document["agents"]][0] > FAILED_CALLS

    res = server.get(f"/api/conversations/{cid}/export", params={"format": "json"})
    assert res.status_code == 200 and res.headers["Content-Type"].startswith("application/json")
    assert res.headers.get("Transfer-Encoding") == "chunked" and "Content-Length" not in res.headers  # streamed
    assert res.content.decode() == export_json(document)

    md = server.get(f"/api/conversations/{cid}/export", params={"format": "md"})
    assert md.headers.get("Transfer-Encoding") == "chunked"
    exported_at = re.search(r"^Created .*, exported (\S+)\.$", md.text, re.MULTILINE).group(1)
    assert md.content.decode() == export_markdown(document, exported_at)
    assert md.text.endswith("Open 10:00–18:00 ✓\n") and "It opens at 10:00.   \n" in md.text  # (stripped at the end)

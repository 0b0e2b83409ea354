"""What a turn costs the database, through the real server (docs/API.md, "Metrics"): `/metrics` counts the
statements and commits, and a routed message with its reply stays within a budget of statements, so a change
that adds a read to every turn (an N+1) fails here rather than only under load (bench/load.py)."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from modules.event_catalogue import SuggestionsEvent, TaskCompleteEvent
from test.conftest import wait_until
from test.integration.event_recorder import Recorder
from test.scripted_llm import match_system, text

SUGGEST = match_system("You suggest what the user may want to say next")
MASTER = match_system("You are MasterAgent")
# A conversation's first message, routed through the pipeline, its reply and the suggestions after it: 37 on
# SQLite in 10 commits (56 before a send read its conversation with its master, and the routing with its agents;
# 54 before a turn's first model call took its start's look at the task and the queue, the routing's record left
# the active agent to the claim that wrote it, and the end of a reply without tool calls stopped looking for open
# ones; 48 before a turn's end looked for answers its asks took only when one took some; 47 before the claim wrote
# its task `running` with its first events; 46 before the active agent's two writes went without a savepoint on
# SQLite; 42 before the suggestions took the user's message and the reply from the turn instead of reading its
# entries; 41 in 11 commits before the release of the message claimed its idle receiver in its own
# transaction; 40 before a turn's end read its conversation's running work in one statement, and the suggestions
# took their event's index from the end; 38 before a release that claimed its receiver's turn wrote the record
# of the delivery); the rest is room for the membership heartbeat.
STATEMENT_BUDGET = 46


def _counts(body: str) -> tuple[int, int]:
    """All statements (every verb) and the commits, from the exposition."""
    families = {family.name: family for family in text_string_to_metric_families(body)}
    assert {"chat_database_statements", "chat_database_commits"} <= families.keys(), body
    statements, commits = (int(sum(sample.value for sample in families[name].samples))
                           for name in ("chat_database_statements", "chat_database_commits"))
    return statements, commits


def test_a_routed_message_and_its_reply_stay_within_a_budget_of_statements(server, llm):
    llm.script(text("Hi."), match=MASTER)
    llm.script(text('```json\n{"questions": ["ok"]}\n```'), match=SUGGEST)
    recorder = Recorder(server.url)
    try:
        before, commits_before = _counts(server.get("/metrics").text)
        ack = recorder.client.call("send_message", {"message": "hello"}, timeout=10)
        assert ack.get("success") is not False, ack
        # Waited for on the socket (the sender is in the room): a poll of the task over HTTP would add reads.
        wait_until(lambda: any(e == SuggestionsEvent.TYPE for e, _ in recorder.seen()), what="suggestions")
        after, commits_after = _counts(server.get("/metrics").text)
    finally:
        recorder.client.disconnect()
    assert any(e == TaskCompleteEvent.TYPE for e, _ in recorder.seen())
    # Besides the send, its routing, the turn, its end and the suggestions: the membership heartbeat's write.
    assert 20 < after - before <= STATEMENT_BUDGET, after - before
    assert 3 <= commits_after - commits_before <= 15

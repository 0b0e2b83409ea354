"""Storage against SQLite, PostgreSQL and MariaDB: schema by migration, ordering, CAS, idempotency."""

from __future__ import annotations

import threading

import psycopg
import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from modules.event_catalogue import TextChunkEvent
from modules.multi_agent.active_agent import Active, ActiveAgentSessionStore
from modules.multi_agent.agent_state import AgentStates
from modules.statuses import AgentState, MessageSource, Route, TaskStatus, Visibility
from modules.storage import agents as agent_store
from modules.storage import client_requests, conversations, messages, tasks
from modules.storage.db import Database
from modules.storage.group_commit import GroupCommit
from modules.storage.message_meta import MessageMeta
from modules.storage.messages import MessageDraft
from modules.storage.models import Base, ClientRequest
from modules.storage.session_store import SessionStore
from modules.storage.task_meta import TaskMeta
from modules.storage.users import get_or_create_user
from test.db_urls import PG_ADMIN, fresh_database, migrated_database
from test.unit.statement_log import statements
from test.unit.teams import conversation_with_sub_agent


@pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
def db(request, tmp_path):
    with fresh_database(request.param, tmp_path) as url:
        database = Database(url)
        database.migrate()
        database.migrate()  # idempotent: a second start-up finds the schema current
        yield database
        database.dispose()


def _conversation(db):
    user = get_or_create_user(db, "alice")
    return conversations.create_conversation(db, user.id, "t")


def test_users_conversations_and_ownership(db):
    alice = get_or_create_user(db, "alice")
    assert get_or_create_user(db, "alice").id == alice.id
    bob = get_or_create_user(db, "bob")
    conv, master = conversations.create_conversation(db, alice.id, "hello")
    assert conversations.get_conversation(db, conv.id, alice.id).title == "hello"
    assert conversations.get_conversation(db, conv.id, bob.id) is None
    assert master.kind == "master" and master.state == AgentState.IDLE
    assert agent_store.get_master(db, conv.id).id == master.id
    assert agent_store.find_agent(db, conv.id, "MasterAgent").id == master.id


def test_a_send_and_its_routing_read_the_conversation_with_its_agents_in_one_statement(db):
    """A send reads its conversation with its master's id; the routing of the held message reads it with its
    agents: one statement each, the same answers as the reads they replace."""
    conv, master, sub, _manager = conversation_with_sub_agent(db)
    other = get_or_create_user(db, "bob")
    found = conversations.get_conversation_and_master(db, conv.id, conv.user_id)
    assert found is not None and (found[0].title, found[1]) == ("t", master.id)
    assert conversations.get_conversation_and_master(db, conv.id, other.id) is None
    assert conversations.get_conversation_and_master(db, "nope", conv.user_id) is None
    routed = conversations.get_conversation_and_agents(db, conv.id)
    assert routed is not None and routed[0].id == conv.id
    assert [a.id for a in routed[1]] == [a.id for a in agent_store.list_agents(db, conv.id)] == [master.id, sub.id]
    assert conversations.get_conversation_and_agents(db, "nope") is None
    assert conversations.mark_deleted(db, conv.id, conv.user_id)
    assert conversations.get_conversation_and_master(db, conv.id, conv.user_id) is None
    routed = conversations.get_conversation_and_agents(db, conv.id)  # the server's own work still reads it
    assert routed is not None and routed[0].deleted_at is not None


def test_messages_keep_order_metadata_and_long_content(db):
    conv, master = _conversation(db)
    long_text = "é" * 100_000
    messages.append_messages(db, conv.id, master.id, [
        MessageDraft(role="user", content="q", meta=MessageMeta(source=MessageSource.USER, visibility=Visibility.CHAT,
                                                                starts_work=True)),
        MessageDraft(role="assistant", content=None, tool_calls=[
            {"id": "c1", "type": "function", "function": {"name": "run_command", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "run_command", "arguments": "{}"}},
        ]),
        MessageDraft(role="tool", content=long_text, tool_call_id="c1", name="run_command"),
    ])
    rows = messages.list_messages(db, master.id)
    assert [r.seq for r in rows] == [0, 1, 2]
    assert rows[0].meta == {"source": MessageSource.USER, "visibility": Visibility.CHAT, "starts_work": True}
    assert rows[2].content == long_text
    with db.read() as s:
        assert [c["id"] for c in messages.open_tool_calls_in(s, master.id)] == ["c2"]
    # a NUL from a model or a tool is stored everywhere (PostgreSQL text refuses it as it is)
    messages.append_messages(db, conv.id, master.id, [MessageDraft(role="assistant", content="a\x00b")])
    assert messages.list_messages(db, master.id)[-1].content == "a\ufffdb"


def test_an_entry_appended_alone_is_numbered_by_its_insert_on_sqlite(db):
    """A reply, a tool result, a drained message: one entry each, numbered after the agent's last by the INSERT
    itself on SQLite (issue 26: a read of the last number first, twice a stream); batches as before."""
    conv, master = _conversation(db)
    with statements(db) as seen:
        one = messages.append_messages(db, conv.id, master.id, [MessageDraft(role="user", content="a")])
        two = messages.append_messages(db, conv.id, master.id, [MessageDraft(role="assistant", content="b")])
        more = messages.append_messages(db, conv.id, master.id, [MessageDraft(role="user", content=c) for c in "cd"])

    assert [m.seq for m in one + two + more] == [0, 1, 2, 3]
    stored = messages.list_messages(db, master.id)
    assert [(m.seq, m.content) for m in stored] == [(0, "a"), (1, "b"), (2, "c"), (3, "d")]
    reads = [x for x in seen if x.startswith("SELECT max(messages.seq)")]
    assert len(reads) == (1 if db.dialect == "sqlite" else 0 if db.dialect == "postgresql" else 3)


def test_task_events_are_numbered_and_read_from_an_offset(db):
    conv, master = _conversation(db)
    with db.write() as s:
        task = tasks.create_task_in(s, conversation_id=conv.id, agent_id=master.id, task_type="chat")
    for i in range(5):
        tasks.insert_events(db, task.id, tasks.next_event_idx(db, task.id),
                            [(TextChunkEvent.TYPE, {"content": str(i)})])
    assert [e.idx for e in tasks.list_events(db, task.id, 2)] == [2, 3, 4]
    assert tasks.set_task_status(db, task.id, TaskStatus.RUNNING, expected=(TaskStatus.PENDING,))
    assert not tasks.set_task_status(db, task.id, TaskStatus.RUNNING, expected=(TaskStatus.PENDING,))
    assert tasks.set_task_status(db, task.id, TaskStatus.SUCCEEDED)
    done = tasks.get_task(db, task.id)
    assert done.status == TaskStatus.SUCCEEDED and done.finished_at >= done.started_at


def test_a_task_keeps_what_started_it_as_a_typed_meta(db):
    conv, master = _conversation(db)
    with db.write() as s:
        started = tasks.create_task_in(s, conversation_id=conv.id, agent_id=master.id, task_type="chat",
                                       meta=TaskMeta(message_ids=["m1", "m2"], from_user=True))
        bare = tasks.create_task_in(s, conversation_id=conv.id, agent_id=master.id, task_type="chat")
    assert tasks.get_task(db, started.id).meta == {"message_ids": ["m1", "m2"], "from_user": True}
    assert tasks.get_task(db, started.id).typed_meta == TaskMeta(message_ids=["m1", "m2"], from_user=True)
    assert tasks.get_task(db, bare.id).meta is None
    assert tasks.get_task(db, bare.id).typed_meta == TaskMeta(message_ids=[], from_user=False)


def test_a_message_meta_sends_its_set_keys_only_and_keeps_unknown_ones():
    meta = MessageMeta.load({"source": MessageSource.USER, "routed": {"route": Route.HIL}, "future_key": 1})
    assert meta.source == MessageSource.USER and meta.visibility is None
    assert meta.dump() == {"source": MessageSource.USER, "routed": {"route": Route.HIL}, "future_key": 1}
    assert meta.model_dump(mode="json") == meta.dump()  # a REST message's `metadata` is the same JSON


def test_session_store_upserts(db):
    store = SessionStore(db)
    assert store.get("c1:router", "activeAgent") is None
    store.set("c1:router", "activeAgent", {"agentName": "InfoAgent"})
    store.set("c1:router", "activeAgent", {"agentName": "MasterAgent"})
    assert store.get("c1:router", "activeAgent") == {"agentName": "MasterAgent"}
    store.delete("c1:router", "activeAgent")
    assert store.get("c1:router", "activeAgent") is None


def test_session_store_upsert_takes_racing_first_writes(db):
    """Eight first writes of one field at once: the dialect's upsert takes them all, no retry, one row."""
    store = SessionStore(db)
    barrier = threading.Barrier(8)
    errors = []

    def write(i):
        barrier.wait()
        try:
            store.set("race:router", "activeAgent", {"agentName": f"Agent{i}"})
        except Exception as exc:  # noqa: BLE001 -- any failure is the finding
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    assert store.fields("race:router")["activeAgent"]["agentName"].startswith("Agent")


def test_a_session_store_write_shares_its_callers_transaction_and_a_failing_store_spares_its_writes(db):
    """`set_in` is a step of the caller's transaction (the routing inbox's record of a delivery, issue 26: its
    own transaction cost a commit per routed message); with the store's table gone it fails alone, behind its
    savepoint, and the caller's other writes commit."""
    store = SessionStore(db)
    conv, master = _conversation(db)
    with db.write() as s:
        assert store.set_in(s, "c1:router", "activeAgent", {"agentId": master.id})
        messages.append_in(s, conv.id, master.id, [MessageDraft(role="user", content="first")])
    assert store.get("c1:router", "activeAgent") == {"agentId": master.id}
    with db.write() as s:
        s.execute(text("DROP TABLE session_store"))
    with db.write() as s:
        assert not store.set_in(s, "c1:router", "activeAgent", {"agentId": "other"})
        messages.append_in(s, conv.id, master.id, [MessageDraft(role="user", content="second")])
    assert [m.content for m in messages.list_messages(db, master.id)] == ["first", "second"]


def test_on_sqlite_a_session_store_write_takes_no_savepoint_and_a_transaction_sqlite_ended_fails_its_caller(
        tmp_path):
    """Issue 26: on SQLite a failed statement undoes only itself, so the savepoint (two more statements, about
    80 us, twice a routed message) is left out; when SQLite has ended the whole transaction (a full disk, an I/O
    error; here a ROLLBACK behind the session's back), the write's error reaches its caller."""
    db = Database(f"sqlite:///{tmp_path / 'app.db'}")
    db.migrate()
    store = SessionStore(db)
    with statements(db) as seen, db.write() as s:
        assert store.set_in(s, "c1:router", "activeAgent", {"agentId": "a"})
    assert len(seen) == 1 and seen[0].startswith("INSERT INTO session_store")
    with db.write() as s:
        s.execute(text("DROP TABLE session_store"))
    with pytest.raises(OperationalError), db.write() as s:
        s.connection().connection.dbapi_connection.execute("ROLLBACK")
        store.set_in(s, "c1:router", "activeAgent", {"agentId": "b"})
    db.dispose()


def test_a_session_store_write_whose_transaction_is_gone_fails_its_caller_too(tmp_path):
    """A lost connection ends the whole transaction (as a deadlock does on MariaDB): the caller must hear it as
    the outage it is (every writer of a group commit's batch does), not a failed store and a commit that fails
    later for another reason."""
    with migrated_database("postgresql", tmp_path) as database:
        store = SessionStore(database)
        with pytest.raises(OperationalError), database.write() as s:
            pid = s.execute(text("SELECT pg_backend_pid()")).scalar()
            with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            store.set_in(s, "c1:router", "activeAgent", {"agentId": "a"})


def test_the_active_agent_is_written_in_the_group_commits_batches(db):
    """Every routed message and user turn records who reasons next (issue 26: a commit of its own each, which
    waited on the lock the group commit's batches hold)."""
    writer = GroupCommit(db)
    store = ActiveAgentSessionStore(SessionStore(db), writer)
    store.set_active_stage("c1", "RoutingAgent")
    store.set_active_agent("c1", "agent-1")
    assert store.get("c1") == Active(agent_id="agent-1") and writer.batches == 2


def test_client_request_reservation_is_exclusive(db):
    user = get_or_create_user(db, "alice")
    outcomes = []
    barrier = threading.Barrier(4)

    def reserve():
        barrier.wait()
        outcomes.append(client_requests.reserve(db, user.id, "m-1"))

    threads = [threading.Thread(target=reserve) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert outcomes.count(None) == 1
    client_requests.complete(db, user.id, "m-1", {"task_id": "t"})
    assert client_requests.reserve(db, user.id, "m-1") == {"task_id": "t"}


def test_agent_state_transitions_are_compare_and_set(db):
    conv, master = _conversation(db)
    states = AgentStates(db)
    heard = []
    states.subscribe(heard.append)
    assert states.transition(master.id, AgentState.COMPLETED) is None  # idle -> completed is not allowed
    wins = []
    barrier = threading.Barrier(4)

    def go():
        barrier.wait()
        wins.append(states.transition(master.id, AgentState.RUNNING))

    threads = [threading.Thread(target=go) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len([w for w in wins if w is not None]) == 1
    assert [(c.previous, c.state) for c in heard] == [("idle", "running")]
    assert agent_store.get_agent(db, master.id).state == AgentState.RUNNING


def test_an_abandoned_reservation_can_be_taken_over(db):
    user = get_or_create_user(db, "alice")
    assert client_requests.reserve(db, user.id, "m-2") is None
    assert client_requests.reserve(db, user.id, "m-2") == client_requests.IN_PROGRESS
    with db.write() as s:
        row = s.get(ClientRequest, (user.id, "m-2"))
        row.created_at -= client_requests.ABANDONED_AFTER_S + 1
    assert client_requests.reserve(db, user.id, "m-2") is None


def test_the_migrations_build_exactly_the_schema_the_models_describe(db):
    with db.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == []

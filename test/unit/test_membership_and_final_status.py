"""What keeps a process's work in hand across database trouble: heartbeats register again after a peer
forgot us, and a turn's end (its final status, released agent, last events and the parent's notice, in one
transaction: server/turns/end.py) is retried until written, never written twice, never over a take-over."""

from __future__ import annotations

import os
from contextlib import contextmanager
from types import SimpleNamespace

import pytest
from sqlalchemy import event
from sqlalchemy.exc import OperationalError

from modules.agents.profiles import SUB_AGENT_KIND
from modules.event_catalogue import AgentStateEvent, ErrorEvent, TaskCompleteEvent
from modules.multi_agent import agent_state
from modules.multi_agent.agent_state import AgentStates
from modules.multi_agent.message_router import MessageRouter, PendingMessage
from modules.statuses import MessageSource, TaskStatus, Visibility
from modules.storage import agents as agent_store
from modules.storage import messages as message_store
from modules.storage import pending_messages as queue
from modules.storage import processes, retry
from modules.storage import tasks as task_store
from modules.storage.db import Database
from modules.storage.group_commit import GroupCommit
from modules.storage.message_meta import MessageMeta
from modules.storage.messages import MessageDraft
from modules.storage.models import ServerProcess, Task
from modules.usage.ledger import UsageLedger
from server.sender import TaskEventSender
from server.turns.end import finish_turn
from server.turns.event_log import EventLog
from server.turns.types import FAILED, STOPPED, SUCCEEDED, Turn, TurnOutcome
from server.turns.waiters import TurnWaiters
from test.unit.teams import conversation_with_sub_agent


class FlakyDatabase(Database):
    """`fail_before` write transactions raise an outage error before running; `fail_after` of them raise
    one after committing (the commit happened, its answer was lost)."""

    def __init__(self, url: str):
        super().__init__(url)
        self.fail_before = self.fail_after = self.writes = 0
        self.on_write = lambda: None  # runs as each write transaction begins

    @contextmanager
    def write(self, **kwargs):  # the group commit's too (`first=True`): a turn's end shares its batches
        self.writes += 1
        self.on_write()
        if self.fail_before:
            self.fail_before -= 1
            raise OperationalError("UPDATE", {}, Exception("database is down"))
        with super().write(**kwargs) as s:
            yield s
        if self.fail_after:
            self.fail_after -= 1
            raise OperationalError("COMMIT", {}, Exception("connection lost after the commit"))


@pytest.fixture
def db(tmp_path):
    database = FlakyDatabase(f"sqlite:///{tmp_path / 'app.db'}")
    database.migrate()
    yield database
    database.dispose()


# -- heartbeats ------------------------------------------------------------------------
def test_a_heartbeat_after_a_peer_forgot_us_registers_us_again(db):
    me = processes.register(db)
    processes.forget(db, {me})
    assert me not in processes.alive_processes(db, "someone-else", 10)
    processes.heartbeat(db, me)
    with db.read() as s:
        row = s.get(ServerProcess, me)
    assert row is not None and row.pid == os.getpid() and row.host == processes.HOST
    assert me in processes.alive_processes(db, me, 10)


def test_a_heartbeat_keeps_a_live_process_from_being_judged_gone(db):
    me = processes.register(db)
    with Database.write(db) as s:
        row = s.get(ServerProcess, me)
        row.heartbeat_at -= 60
        row.pid = 1  # a peer on this host whose pid lives (this process's pid would be a previous life of it)
    assert me in processes.gone_processes(db, "someone-else", 10)
    processes.heartbeat(db, me)
    assert me not in processes.gone_processes(db, "someone-else", 10)
    with db.read() as s:
        assert len(list(s.query(ServerProcess))) == 1  # beat, not registered twice


def test_a_process_on_this_host_whose_pid_is_gone_is_gone_at_once(db):
    me = processes.register(db)
    with Database.write(db) as s:
        s.get(ServerProcess, me).pid = 2**22 + 7  # beyond pid_max: no such process
    assert processes.gone_processes(db, "someone-else", 10) == {me: processes.HOST}
    assert me not in processes.alive_processes(db, "someone-else", 10)


def test_a_previous_life_of_this_process_with_its_pid_is_gone_at_once(db):
    """A restarted container runs the server with the pid of its previous life (1, say), in a pid namespace that
    may reuse the old one's number: the old row names this host and this pid. No other live process can have this
    pid here, so it is gone at once (its tasks and held messages taken over at start-up), heartbeat fresh or not."""
    previous_life, me = processes.register(db), processes.register(db)
    assert processes.gone_processes(db, me, 10) == {previous_life: processes.HOST}
    assert previous_life not in processes.alive_processes(db, me, 10)
    assert me in processes.alive_processes(db, me, 10)


# -- the end of a turn -------------------------------------------------------------------
class Transport:
    def __init__(self):
        self.emitted = []

    def emit(self, event_type, data, room):
        self.emitted.append(event_type)


@pytest.fixture
def turn_end(db, monkeypatch):
    """A sub-agent's turn in progress in this process ("me"), and what `finish_turn` needs of the runtime:
    the real database, event log, agent states and router (its delivery observed), no sleeps between tries
    (retry's own only: the group commit's leader yields through time.sleep(0) too)."""
    naps = []
    monkeypatch.setattr(retry, "time", SimpleNamespace(sleep=naps.append))
    conv, master, sub, manager = conversation_with_sub_agent(db)
    states, router, delivered = AgentStates(db), MessageRouter(db), []
    router.deliver = delivered.append
    with Database.write(db) as s:
        states.transition_in(s, sub.id, agent_state.RUNNING)
        task = task_store.create_task_in(s, conversation_id=conv.id, agent_id=sub.id, task_type="sub_agent",
                                         owner="me")
    rt = SimpleNamespace(db=db, event_log=EventLog(db), agent_states=states, router=router, sub_agents=manager,
                         commands=SimpleNamespace(has_running=lambda *args, **kwargs: False),
                         membership=SimpleNamespace(process_id="me"),
                         suggestions=SimpleNamespace(schedule=lambda **kwargs: None),
                         ledger=UsageLedger(db, GroupCommit(db)))
    turn = Turn(task_id=task.id, conversation_id=conv.id, agent_id=sub.id, display_name=sub.display_name,
                profile=None, kind=SUB_AGENT_KIND, parent_id=master.id,  # the end reads no profile
                drained=[SimpleNamespace(seq=0, role="assistant")])
    transport = Transport()
    sender = TaskEventSender(rt.event_log, transport, task_id=task.id, conversation_id=conv.id, agent_id=sub.id)
    end = lambda outcome, waiters=None: finish_turn(rt, turn, sender, outcome, waiters or TurnWaiters())  # noqa: E731
    return SimpleNamespace(end=end, task_id=task.id, master=master, sub=sub, naps=naps, delivered=delivered,
                           transport=transport, turn=turn, conv=conv, rt=rt)


def _logged(db, task_id):
    return [e.type for e in task_store.list_events(db, task_id)]


def test_the_end_of_a_turn_is_retried_through_an_outage_and_written_once(db, turn_end):
    t = turn_end
    db.fail_before = 3
    assert t.end(TurnOutcome(SUCCEEDED)) is True
    assert len(t.naps) == 3 and t.naps == sorted(t.naps) and t.naps[0] > 0, "each try backs off, longer each time"
    assert task_store.get_task(db, t.task_id).status == TaskStatus.SUCCEEDED
    assert agent_store.get_agent(db, t.sub.id).state == agent_state.COMPLETED
    [notice] = queue.list_queued(db, t.master.id)
    assert notice.content.startswith(f"[Sub-agent {t.sub.display_name} succeeded")
    assert [n.id for n in t.delivered] == [notice.id]
    assert _logged(db, t.task_id) == t.transport.emitted == [AgentStateEvent.TYPE, TaskCompleteEvent.TYPE]


@pytest.mark.parametrize("wrote", [False, True])
def test_a_turns_end_looks_for_its_open_tool_calls_only_when_it_wrote_some(db, turn_end, wrote):
    """Issue 26: every reply's end read the agent's open tool calls, where only a turn that wrote a call can have
    one of its own left without a result (a stop between the call and its result: the end closes it)."""
    t = turn_end
    t.turn.wrote_tool_calls = wrote
    if wrote:
        call = {"id": "c1", "type": "function", "function": {"name": "run_command", "arguments": "{}"}}
        message_store.append_messages(db, t.conv.id, t.sub.id, [MessageDraft(role="assistant", content=None,
                                                                             tool_calls=[call])])
    seen: list[str] = []

    def record(_conn, _cursor, statement, *_args):
        seen.append(" ".join(statement.split()))

    event.listen(db.engine, "before_cursor_execute", record)
    assert t.end(TurnOutcome(STOPPED)) is True
    event.remove(db.engine, "before_cursor_execute", record)
    assert bool([s for s in seen if s.startswith("SELECT messages.role, messages.tool_calls")]) == wrote
    closed = [m for m in message_store.list_messages(db, t.sub.id) if m.role == "tool"]
    assert [m.tool_call_id for m in closed] == (["c1"] if wrote else [])


@pytest.mark.parametrize("asked", [False, True])
def test_a_turns_end_puts_back_an_answer_its_ask_took_and_looks_only_when_one_did(db, turn_end, asked):
    """An answer an ask took but whose turn died before writing it into the history goes back to the queue at
    the turn's end. Issue 26: every turn's end looked for one (a correlated UPDATE, 1.4 % of the CPU of 500
    streams); now only a turn whose ask took an answer in this process does."""
    t = turn_end
    if asked:
        answer = PendingMessage.new(conversation_id=t.conv.id, target_agent_id=t.sub.id, type="answer",
                                    content="the blue one", source_display_name="master",
                                    source_agent_id=t.master.id, question_id="q_000000000001",
                                    meta=MessageMeta(source=MessageSource.AGENT_MESSAGE, visibility=Visibility.CHAT))
        with Database.write(db) as s:
            assert queue.enqueue_in(s, answer.row_values())
        waiter = t.rt.router.begin_ask(t.sub.id, "q_000000000001", t.master.id)
        assert t.rt.router.wait_for_answer(waiter, 10, lambda: False) is not None  # taken; the turn then fails
        assert queue.list_queued(db, t.sub.id) == []
    seen: list[str] = []

    def record(_conn, _cursor, statement, *_args):
        seen.append(" ".join(statement.split()))

    event.listen(db.engine, "before_cursor_execute", record)
    assert t.end(TurnOutcome(FAILED, {"code": "database_lost", "message": "gone"})) is True
    event.remove(db.engine, "before_cursor_execute", record)
    assert bool([s for s in seen if s.startswith("UPDATE pending_messages") and "LIKE" in s]) == asked
    assert [m.content for m in queue.list_queued(db, t.sub.id)] == (["the blue one"] if asked else [])
    assert t.rt.router.forget_answers_taken(t.sub.id) is False  # forgotten by the end that looked


def test_an_end_committed_whose_answer_was_lost_counts_as_written(db, turn_end):
    t = turn_end
    db.fail_after = 1
    assert t.end(TurnOutcome(FAILED, {"code": "x", "message": "boom"})) is True
    assert len(t.naps) == 1
    task = task_store.get_task(db, t.task_id)
    assert (task.status, task.error) == (TaskStatus.FAILED, {"code": "x", "message": "boom"})
    assert agent_store.get_agent(db, t.sub.id).state == agent_state.IDLE
    [notice] = queue.list_queued(db, t.master.id)
    assert [n.id for n in t.delivered] == [notice.id]
    assert _logged(db, t.task_id) == [AgentStateEvent.TYPE, ErrorEvent.TYPE]  # once: the retry wrote nothing again


def test_a_turn_another_process_took_over_keeps_its_end_and_sends_no_notice(db, turn_end):
    t = turn_end
    with Database.write(db) as s:
        task = s.get(Task, t.task_id)
        task.status, task.owner, task.error = TaskStatus.FAILED, "the-other-process", {"code": "interrupted"}
    assert t.end(TurnOutcome(SUCCEEDED)) is False
    task = task_store.get_task(db, t.task_id)
    assert (task.status, task.owner, task.error) == (TaskStatus.FAILED, "the-other-process", {"code": "interrupted"})
    assert queue.list_queued(db, t.master.id) == [] and t.delivered == []
    assert _logged(db, t.task_id) == [] and t.transport.emitted == []


def test_a_blocking_wait_that_gives_up_while_the_sub_agent_ends_gets_its_result_as_a_notice(db, turn_end):
    """A blocking create_sub_agent that gives up (its timeout, or a stop) tells the master a notice will follow.
    When it gives up while the sub-agent's turn is ending (after the end saw it waiting, before the result was
    handed over), the result must still reach the master: as that notice, in its queue."""
    t = turn_end
    waiters = TurnWaiters()
    waiter = waiters.expect(t.sub.id)
    gave_up: list[object] = []

    def give_up() -> None:  # the wait's deadline passes as the end commits
        if not gave_up:
            gave_up.append(waiter.wait(0, lambda: True))

    db.on_write = give_up
    assert t.end(TurnOutcome(SUCCEEDED), waiters) is True
    assert gave_up == [None] and waiter.result is None
    [notice] = queue.list_queued(db, t.master.id)
    assert notice.id == f"done-{t.task_id}"
    assert notice.content.startswith(f"[Sub-agent {t.sub.display_name} succeeded")
    assert [n.id for n in t.delivered] == [notice.id]


def test_a_result_handed_to_a_blocking_wait_is_not_also_sent_as_a_notice(db, turn_end):
    t = turn_end
    waiters = TurnWaiters()
    waiter = waiters.expect(t.sub.id)
    assert t.end(TurnOutcome(SUCCEEDED), waiters) is True
    assert waiter.wait(1, lambda: False) is not None and waiter.result.status == TaskStatus.SUCCEEDED
    assert queue.list_queued(db, t.master.id) == [] and t.delivered == []

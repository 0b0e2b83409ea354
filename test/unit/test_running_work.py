"""A conversation's background work in one statement, on every database (issue 26): every turn's end asks for its
sub-agents at work and whether a command runs, for its `task_complete` flags and the master's busy list; two
statements before."""

from __future__ import annotations

import pytest
from sqlalchemy import update

from modules.multi_agent import agent_state
from modules.statuses import CommandStatus
from modules.storage import conversations
from modules.storage.models import Agent, BackgroundCommand
from modules.storage.work_counts import WorkingSubAgent, running_work
from test.db_urls import migrated_database
from test.unit.statement_log import statements
from test.unit.teams import conversation_with_sub_agent


@pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
def any_db(request, tmp_path):
    with migrated_database(request.param, tmp_path) as database:
        yield database


def _command(db, conversation_id, agent_id, command_id, status):
    with db.write() as s:
        s.add(BackgroundCommand(id=command_id, conversation_id=conversation_id, agent_id=agent_id, command="sleep 9",
                                status=status, timeout_s=9.0, log_path="/dev/null", created_at=1.0))


def test_a_conversations_running_work_in_one_statement(any_db):
    db = any_db
    conv, master, first, manager = conversation_with_sub_agent(db)
    others = [manager.create_sub_agent(master, "InfoAgent", f"task {n}") for n in range(3)]
    # Created in this order, at distinct moments; states: waiting, running, idle, completed.
    for n, (agent, state) in enumerate(zip([first, *others], [agent_state.WAITING, agent_state.RUNNING,
                                                              agent_state.IDLE, agent_state.COMPLETED], strict=True)):
        with db.write() as s:
            s.execute(update(Agent).where(Agent.id == agent.id).values(state=state, created_at=100.0 + n))
    elsewhere, _ = conversations.create_conversation(db, conv.user_id, "other")
    _command(db, elsewhere.id, master.id, "c-elsewhere", CommandStatus.RUNNING)
    _command(db, conv.id, master.id, "c-done", CommandStatus.SUCCEEDED)

    with statements(db) as seen:
        work = running_work(db, conv.id)

    assert len(seen) == 1
    assert work.sub_agents == [WorkingSubAgent(first.id, first.display_name, "task"),
                               WorkingSubAgent(others[0].id, others[0].display_name, "task 0")]
    assert work.commands is False  # one ended, one runs in another conversation

    _command(db, conv.id, master.id, "c-running", CommandStatus.RUNNING)
    assert running_work(db, conv.id).commands is True


def test_with_no_sub_agent_at_work_the_commands_flag_still_comes_back(any_db):
    db = any_db
    conv, master, _sub, _manager = conversation_with_sub_agent(db)  # the sub-agent is idle
    assert running_work(db, conv.id).sub_agents == [] and running_work(db, conv.id).commands is False
    _command(db, conv.id, master.id, "c-1", CommandStatus.RUNNING)
    assert (running_work(db, conv.id).sub_agents, running_work(db, conv.id).commands) == ([], True)

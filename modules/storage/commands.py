"""Background command rows: every query of modules/background_command_manager.py, which runs the commands."""

from __future__ import annotations

import functools

from sqlalchemy import Select, bindparam, select, update
from sqlalchemy.orm import Session

from modules.statuses import FINISHED_COMMAND_STATUSES, CommandStatus
from modules.storage.db import Database
from modules.storage.models import BackgroundCommand
from modules.storage.results import rowcount

# A command's states, by their names here (defined once in modules/statuses.py).
RUNNING = CommandStatus.RUNNING
SUCCEEDED, FAILED, TIMED_OUT = CommandStatus.SUCCEEDED, CommandStatus.FAILED, CommandStatus.TIMED_OUT
CANCELLED, LOST = CommandStatus.CANCELLED, CommandStatus.LOST
FINISHED_STATUSES = FINISHED_COMMAND_STATUSES


def insert_running(db: Database, command: BackgroundCommand) -> None:
    with db.write() as s:
        s.add(command)


def record_pid(db: Database, command_id: str, pid: int, started: int | None) -> None:
    with db.write() as s:
        s.execute(update(BackgroundCommand).where(BackgroundCommand.id == command_id)
                  .values(pid=pid, pid_started=started))


def lock_running_in(s: Session, command_ids: list[str]) -> list[BackgroundCommand]:
    """The commands among these that still run, row-locked until the caller's commit (their finish)."""
    return list(s.scalars(select(BackgroundCommand).where(BackgroundCommand.id.in_(command_ids),
                                                          BackgroundCommand.status == RUNNING)
                          .with_for_update()))


def request_cancel(db: Database, command_id: str) -> bool:
    """Flag a running command for its owner process to cancel; False when it has ended."""
    with db.write() as s:
        return rowcount(s.execute(update(BackgroundCommand).where(BackgroundCommand.id == command_id,
                                                         BackgroundCommand.status == RUNNING)
                         .values(cancel_requested=True))) == 1


def running_ids_of_agent(db: Database, agent_id: str) -> list[str]:
    with db.read() as s:
        return list(s.scalars(select(BackgroundCommand.id).where(BackgroundCommand.agent_id == agent_id,
                                                                 BackgroundCommand.status == RUNNING)))


def cancel_requested_among(db: Database, command_ids: list[str]) -> list[str]:
    with db.read() as s:
        return list(s.scalars(select(BackgroundCommand.id).where(BackgroundCommand.id.in_(command_ids),
                                                                 BackgroundCommand.cancel_requested)))


def get(db: Database, command_id: str) -> BackgroundCommand | None:
    with db.read() as s:
        return s.get(BackgroundCommand, command_id)


def get_many(db: Database, command_ids: list[str]) -> dict[str, BackgroundCommand]:
    with db.read() as s:
        return {c.id: c for c in s.scalars(select(BackgroundCommand).where(BackgroundCommand.id.in_(command_ids)))}


def list_for_conversation(db: Database, conversation_id: str) -> list[BackgroundCommand]:
    with db.read() as s:
        return list(s.scalars(select(BackgroundCommand).where(BackgroundCommand.conversation_id == conversation_id)
                              .order_by(BackgroundCommand.created_at)))


def any_running(db: Database, conversation_id: str | None = None, agent_id: str | None = None) -> bool:
    query = _running(conversation_id is not None, agent_id is not None)
    with db.read() as s:
        return s.scalars(query, {"conversation": conversation_id, "agent": agent_id}).first() is not None


@functools.cache
def _running(by_conversation: bool, by_agent: bool) -> Select[str]:
    """`any_running`'s statement for the ids it is given, built once (asked at every turn's end; see
    modules/storage/agents.py)."""
    query = select(BackgroundCommand.id).where(BackgroundCommand.status == RUNNING)
    if by_conversation:
        query = query.where(BackgroundCommand.conversation_id == bindparam("conversation"))
    if by_agent:
        query = query.where(BackgroundCommand.agent_id == bindparam("agent"))
    return query.limit(1)


def list_running(db: Database) -> list[BackgroundCommand]:
    with db.read() as s:
        return list(s.scalars(select(BackgroundCommand).where(BackgroundCommand.status == RUNNING)))

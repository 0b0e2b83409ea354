"""Initial schema: users, conversations, agents, messages, tasks, task events, session store.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

LongText = sa.Text().with_variant(mysql.LONGTEXT(), "mysql", "mariadb")


def upgrade() -> None:
    op.create_table(
        "users",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(128), nullable=False, unique=True),
        sa.Column("created_at", sa.Double, nullable=False),
    )
    op.create_table(
        "conversations",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("user_id", sa.Integer, sa.ForeignKey("users.id"), nullable=False, index=True),
        sa.Column("title", sa.String(200), nullable=False),
        sa.Column("created_at", sa.Double, nullable=False),
        sa.Column("updated_at", sa.Double, nullable=False, index=True),
    )
    op.create_table(
        "agents",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("conversation_id", sa.String(36), sa.ForeignKey("conversations.id"), nullable=False, index=True),
        sa.Column("display_name", sa.String(128), nullable=False),
        sa.Column("role", sa.String(128), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("parent_id", sa.String(36), nullable=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("created_at", sa.Double, nullable=False),
        sa.Column("updated_at", sa.Double, nullable=False),
        sa.UniqueConstraint("conversation_id", "display_name"),
    )
    op.create_table(
        "messages",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("message_id", sa.String(64), nullable=False, unique=True),
        sa.Column("conversation_id", sa.String(36), sa.ForeignKey("conversations.id"), nullable=False, index=True),
        sa.Column("agent_id", sa.String(36), sa.ForeignKey("agents.id"), nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("content", LongText, nullable=True),
        sa.Column("tool_calls", sa.JSON, nullable=True),
        sa.Column("tool_call_id", sa.String(128), nullable=True),
        sa.Column("name", sa.String(128), nullable=True),
        sa.Column("metadata", sa.JSON, nullable=False),
        sa.Column("created_at", sa.Double, nullable=False),
        sa.UniqueConstraint("agent_id", "seq"),
    )
    op.create_table(
        "tasks",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("conversation_id", sa.String(36), sa.ForeignKey("conversations.id"), nullable=False, index=True),
        sa.Column("agent_id", sa.String(36), sa.ForeignKey("agents.id"), nullable=False, index=True),
        sa.Column("task_type", sa.String(32), nullable=False),
        sa.Column("status", sa.String(16), nullable=False, index=True),
        sa.Column("trigger_message_id", sa.String(64), nullable=True),
        sa.Column("error", sa.JSON, nullable=True),
        sa.Column("created_at", sa.Double, nullable=False),
        sa.Column("started_at", sa.Double, nullable=True),
        sa.Column("finished_at", sa.Double, nullable=True),
    )
    op.create_table(
        "task_events",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("task_id", sa.String(36), sa.ForeignKey("tasks.id"), nullable=False),
        sa.Column("idx", sa.Integer, nullable=False),
        sa.Column("type", sa.String(64), nullable=False),
        sa.Column("data", sa.JSON, nullable=False),
        sa.Column("ts", sa.Double, nullable=False),
        sa.UniqueConstraint("task_id", "idx"),
    )
    op.create_table(
        "session_store",
        sa.Column("key", sa.String(191), primary_key=True),
        sa.Column("field", sa.String(191), primary_key=True),
        sa.Column("value", sa.JSON, nullable=True),
        sa.Column("updated_at", sa.Double, nullable=False),
    )
    op.create_table(
        "client_requests",
        sa.Column("user_id", sa.Integer, sa.ForeignKey("users.id"), primary_key=True),
        sa.Column("client_message_id", sa.String(128), primary_key=True),
        sa.Column("response", sa.JSON, nullable=False),
        sa.Column("created_at", sa.Double, nullable=False),
    )


def downgrade() -> None:
    for table in ("client_requests", "session_store", "task_events", "tasks", "messages", "agents",
                  "conversations", "users"):
        op.drop_table(table)

"""Per-agent pending-message queues, background commands, sub-agent and task metadata.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

LongText = sa.Text().with_variant(mysql.LONGTEXT(), "mysql", "mariadb")


def upgrade() -> None:
    op.create_table(
        "pending_messages",
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("id", sa.String(64), nullable=False, unique=True),
        sa.Column("conversation_id", sa.String(36), sa.ForeignKey("conversations.id"), nullable=False),
        sa.Column("target_agent_id", sa.String(36), sa.ForeignKey("agents.id"), nullable=False),
        sa.Column("source_agent_id", sa.String(36), nullable=True),
        sa.Column("source_display_name", sa.String(128), nullable=False),
        sa.Column("type", sa.String(16), nullable=False),
        sa.Column("content", LongText, nullable=False),
        sa.Column("question_id", sa.String(64), nullable=True, index=True),
        sa.Column("metadata", sa.JSON, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("consumed_by", sa.String(64), nullable=True),
        sa.Column("created_at", sa.Double, nullable=False),
        sa.Column("consumed_at", sa.Double, nullable=True),
    )
    op.create_index("ix_pending_target_status", "pending_messages", ["target_agent_id", "status", "seq"])
    op.create_table(
        "background_commands",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("conversation_id", sa.String(36), sa.ForeignKey("conversations.id"), nullable=False, index=True),
        sa.Column("agent_id", sa.String(36), sa.ForeignKey("agents.id"), nullable=False),
        sa.Column("command", LongText, nullable=False),
        sa.Column("status", sa.String(16), nullable=False, index=True),
        sa.Column("exit_code", sa.Integer, nullable=True),
        sa.Column("output_tail", LongText, nullable=True),
        sa.Column("output_truncated", sa.Boolean, nullable=False),
        sa.Column("timeout_s", sa.Double, nullable=False),
        sa.Column("pid", sa.Integer, nullable=True),
        sa.Column("log_path", sa.String(512), nullable=False),
        sa.Column("error", sa.String(512), nullable=True),
        sa.Column("created_at", sa.Double, nullable=False),
        sa.Column("finished_at", sa.Double, nullable=True),
    )
    with op.batch_alter_table("agents") as batch:
        batch.add_column(sa.Column("task", LongText, nullable=True))
        batch.add_column(sa.Column("terminated", sa.Boolean, nullable=False, server_default=sa.false()))
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("meta", sa.JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("meta")
    with op.batch_alter_table("agents") as batch:
        batch.drop_column("terminated")
        batch.drop_column("task")
    op.drop_table("background_commands")
    op.drop_index("ix_pending_target_status", "pending_messages")
    op.drop_table("pending_messages")

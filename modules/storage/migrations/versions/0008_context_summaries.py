"""Context summaries: what an agent's model sees in place of the older part of its history, which itself
stays whole (README, "Long conversations").

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_LONG_TEXT = sa.Text().with_variant(mysql.LONGTEXT(), "mysql", "mariadb")


def upgrade() -> None:
    op.create_table(
        "context_summaries",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("summary_id", sa.String(36), nullable=False, unique=True),
        sa.Column("conversation_id", sa.String(36), sa.ForeignKey("conversations.id"), nullable=False),
        sa.Column("agent_id", sa.String(36), sa.ForeignKey("agents.id"), nullable=False),
        sa.Column("through_seq", sa.Integer, nullable=False),
        sa.Column("content", _LONG_TEXT, nullable=False),
        sa.Column("summarised_messages", sa.Integer, nullable=False),
        sa.Column("tokens_before", sa.Integer, nullable=False),
        sa.Column("tokens_after", sa.Integer, nullable=False),
        sa.Column("model", sa.String(128), nullable=False),
        sa.Column("task_id", sa.String(36), nullable=True),
        sa.Column("created_at", sa.Double, nullable=False),
    )
    op.create_index("ix_context_summaries_agent", "context_summaries", ["agent_id", "id"])
    op.create_index("ix_context_summaries_conversation_id", "context_summaries", ["conversation_id"])


def downgrade() -> None:
    op.drop_index("ix_context_summaries_conversation_id", table_name="context_summaries")
    op.drop_index("ix_context_summaries_agent", table_name="context_summaries")
    op.drop_table("context_summaries")

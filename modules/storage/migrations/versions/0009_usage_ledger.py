"""The usage ledger: one row per model request, with its tokens, model, purpose, agent, task, user and cost.

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "model_usage",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("user_id", sa.Integer, nullable=True),
        sa.Column("conversation_id", sa.String(36), nullable=True),
        sa.Column("task_id", sa.String(36), nullable=True),
        sa.Column("agent_id", sa.String(36), nullable=True),
        sa.Column("agent", sa.String(128), nullable=False),
        sa.Column("purpose", sa.String(32), nullable=False),
        sa.Column("model", sa.String(128), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("estimated", sa.Boolean, nullable=False),
        sa.Column("prompt_tokens", sa.Integer, nullable=False),
        sa.Column("completion_tokens", sa.Integer, nullable=False),
        sa.Column("cached_tokens", sa.Integer, nullable=False),
        sa.Column("reasoning_tokens", sa.Integer, nullable=False),
        sa.Column("cost", sa.Double, nullable=True),
        sa.Column("latency_s", sa.Double, nullable=False),
        sa.Column("first_token_s", sa.Double, nullable=True),
        sa.Column("created_at", sa.Double, nullable=False),
    )
    op.create_index("ix_model_usage_user_created", "model_usage", ["user_id", "created_at"])
    op.create_index("ix_model_usage_conversation_id", "model_usage", ["conversation_id"])
    op.create_index("ix_model_usage_task_id", "model_usage", ["task_id"])


def downgrade() -> None:
    op.drop_table("model_usage")

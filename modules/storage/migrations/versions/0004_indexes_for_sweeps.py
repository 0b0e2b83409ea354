"""Indexes for the membership sweep's scans (agents by state, queued messages by status).

Revision ID: 0004
Revises: 0003
"""

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_agents_state", "agents", ["state"])
    op.create_index("ix_pending_status", "pending_messages", ["status"])


def downgrade() -> None:
    op.drop_index("ix_pending_status", "pending_messages")
    op.drop_index("ix_agents_state", "agents")

"""Foreground commands while they run, so that the per-user cap on them (MAX_FOREGROUND_COMMANDS_PER_USER) counts
those of every server process.

Revision ID: 0012
Revises: 0011
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "foreground_commands",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("conversation_id", sa.String(36), nullable=False, index=True),
        sa.Column("agent_id", sa.String(36), nullable=False),
        sa.Column("owner", sa.String(36), nullable=True, index=True),
        sa.Column("created_at", sa.Double, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("foreground_commands")

"""A cancel asked through one server process for a command that another process runs.

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("background_commands") as batch:
        batch.add_column(sa.Column("cancel_requested", sa.Boolean, nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("background_commands") as batch:
        batch.drop_column("cancel_requested")

"""Server processes and who owns each task and background command.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "server_processes",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("started_at", sa.Double, nullable=False),
        sa.Column("heartbeat_at", sa.Double, nullable=False, index=True),
    )
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("owner", sa.String(36), nullable=True))
        batch.add_column(sa.Column("stop_requested", sa.Boolean, nullable=False, server_default=sa.false()))
    with op.batch_alter_table("background_commands") as batch:
        batch.add_column(sa.Column("owner", sa.String(36), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("background_commands") as batch:
        batch.drop_column("owner")
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("stop_requested")
        batch.drop_column("owner")
    op.drop_table("server_processes")

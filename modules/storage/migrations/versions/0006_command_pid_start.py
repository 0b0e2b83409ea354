"""When a background command's process started, so a restart never kills a process that reused its pid.

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("background_commands") as batch:
        batch.add_column(sa.Column("pid_started", sa.BigInteger, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("background_commands") as batch:
        batch.drop_column("pid_started")

"""Which server process routes each held user message (`pending_messages.routing_process`), so that a live
process can take over the held messages of one that died (docs/ARCHITECTURE.md, "Held messages of a dead
process").

Revision ID: 0013
Revises: 0012
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("pending_messages") as batch:
        batch.add_column(sa.Column("routing_process", sa.String(36), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("pending_messages") as batch:
        batch.drop_column("routing_process")

"""A send's `client_message_id` compared byte for byte on MySQL and MariaDB too: their default collation ignores
case and accents, so a send whose id differed from an earlier one only in case (`Msg-1`, `msg-1`) got the
earlier send's answer and was not stored. SQLite and PostgreSQL compare exactly already.

Revision ID: 0011
Revises: 0010
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name in ("mysql", "mariadb"):
        op.alter_column("client_requests", "client_message_id", existing_type=sa.String(128), existing_nullable=False,
                        type_=mysql.VARCHAR(128, charset="utf8mb4", collation="utf8mb4_bin"))


def downgrade() -> None:
    if op.get_bind().dialect.name in ("mysql", "mariadb"):
        op.alter_column("client_requests", "client_message_id",
                        existing_type=mysql.VARCHAR(128, collation="utf8mb4_bin"), existing_nullable=False,
                        type_=sa.String(128))

"""Users' names compared byte for byte on MySQL and MariaDB too: their default collation ignores case and
accents, so two users configured as `Anna` and `anna` (or `René` and `Rene`) were found as one user there,
and each owned the other's conversations. SQLite and PostgreSQL compare exactly already.

A row that two such names shared stays the user of the name that made it; the other name gets its own
user at its next request.

Revision ID: 0010
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name in ("mysql", "mariadb"):
        op.alter_column("users", "name", existing_type=sa.String(128), existing_nullable=False,
                        type_=mysql.VARCHAR(128, charset="utf8mb4", collation="utf8mb4_bin"))


def downgrade() -> None:
    if op.get_bind().dialect.name in ("mysql", "mariadb"):
        op.alter_column("users", "name", existing_type=mysql.VARCHAR(128, collation="utf8mb4_bin"),
                        existing_nullable=False, type_=sa.String(128))

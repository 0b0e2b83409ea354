"""An index in the conversation list's page order (one user's conversations by last activity, newest first, then
id), so a page of `GET /api/conversations` reads its rows from its cursor on instead of sorting the user's.

It replaces the index of `updated_at` alone: only the list used it, every message's activity updated it, and
PostgreSQL's planner would walk it past the whole site's newer conversations to find one user's.

Revision ID: 0014
Revises: 0013
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_conversations_user_page", "conversations", ["user_id", sa.text("updated_at DESC"), "id"])
    op.drop_index("ix_conversations_updated_at", "conversations")


def downgrade() -> None:
    op.create_index("ix_conversations_updated_at", "conversations", ["updated_at"])
    op.drop_index("ix_conversations_user_page", "conversations")

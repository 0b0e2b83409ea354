"""Alembic environment: always run programmatically with a live connection (see storage.db)."""

from alembic import context

from modules.storage.models import Base

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()

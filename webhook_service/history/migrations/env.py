"""Alembic's environment: always run by ``database.upgrade`` with a connection it opened."""

from alembic import context

context.configure(connection=context.config.attributes["connection"])
with context.begin_transaction():
    context.run_migrations()

"""Alembic environment of the metadata store.

Run through :func:`cronwheel.store.migrate.upgrade_database`, which hands over a connection of
the async engine (``config.attributes["connection"]``, inside ``connection.run_sync``), so no
sync driver is needed. Run by the ``alembic`` command (``-x url=...`` or ``sqlalchemy.url``), it
makes its own async engine the same way.
"""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy.engine import Connection

from cronwheel.store.migrate import run_sync_at
from cronwheel.store.schema import metadata

config = context.config


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=True,  # SQLite cannot ALTER most things: later revisions copy tables
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def _url() -> str:
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no database URL: pass -x url=... or set sqlalchemy.url")
    return url


if context.is_offline_mode():
    context.configure(url=_url(), target_metadata=metadata, literal_binds=True, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    connection = config.attributes.get("connection")
    if connection is None:
        asyncio.run(run_sync_at(_url(), _run))
    else:
        _run(connection)

"""Schema migrations of the metadata store (Alembic, packaged in ``migrations/``).

:func:`upgrade_database` brings a database to the newest revision through the async engine
(``connection.run_sync``), so no sync driver is needed. It is safe to call on every start: at the
newest revision it only reads ``alembic_version``; concurrent callers are serialized (SQLite:
``BEGIN IMMEDIATE``; PostgreSQL: a transaction-scoped advisory lock).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from cronwheel.errors import BackendUnavailableError
from cronwheel.store.driver import WRITE, create_engine, translated_errors

MIGRATIONS = Path(__file__).with_name("migrations")
_PG_MIGRATION_LOCK = 0x63726F6E  # "cron": any fixed advisory lock key


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


async def upgrade_database(url: str) -> None:
    """Migrate the database at ``url`` (``sqlite:///...``, ``postgresql://...``) to the newest
    revision."""
    await run_sync_at(url, _upgrade_to_head)


async def upgrade_engine(engine: AsyncEngine) -> None:
    """Migrate through an existing engine (what :func:`cronwheel.store.sql.open_store` does)."""
    await run_sync_in(engine, _upgrade_to_head)


async def current_revision(engine: AsyncEngine) -> str | None:
    def read(connection: Connection) -> str | None:
        return MigrationContext.configure(connection).get_current_revision()

    with translated_errors():
        async with engine.connect() as connection:
            return await connection.run_sync(read)


async def run_sync_at(url: str, function: Callable[[Connection], None]) -> None:
    """Run ``function`` in one serialized write transaction on a fresh engine for ``url``."""
    engine = create_engine(url)
    try:
        await run_sync_in(engine, function)
    finally:
        await engine.dispose()


_SQLITE_LOCK_ATTEMPTS = 24  # each waits up to busy_timeout (5 s) for the writer ahead: ~2 min


async def run_sync_in(engine: AsyncEngine, function: Callable[[Connection], None]) -> None:
    """Run ``function`` in one serialized write transaction. On SQLite, where waiting for another
    process's migration is bounded by ``busy_timeout``, a "database is locked" is tried again: a
    first migration can hold the lock longer than one wait, and starting processes queue behind it."""
    for attempt in range(1, _SQLITE_LOCK_ATTEMPTS + 1):
        try:
            await _run_sync_once(engine, function)
            return
        except BackendUnavailableError as error:
            if (
                engine.dialect.name != "sqlite"
                or "locked" not in str(error)
                or attempt == _SQLITE_LOCK_ATTEMPTS
            ):
                raise
            await asyncio.sleep(0.2)


async def _run_sync_once(engine: AsyncEngine, function: Callable[[Connection], None]) -> None:
    with translated_errors():
        async with engine.connect() as connection:
            await connection.execution_options(**WRITE)
            async with connection.begin():
                if connection.dialect.name == "postgresql":
                    await connection.execute(text(f"SELECT pg_advisory_xact_lock({_PG_MIGRATION_LOCK})"))
                await connection.run_sync(function)


def _upgrade_to_head(connection: Connection) -> None:
    config = alembic_config()
    config.attributes["connection"] = connection
    command.upgrade(config, "head")

"""Fresh metadata stores for tests, each copied from a database migrated once per worker.

Running every Alembic migration for each test's store was most of the time of the store-heavy
tests. Instead, each pytest(-xdist) worker migrates one template per backend, the first time a
test needs it, and every test gets a copy:

* SQLite: a file copy of a database file migrated once (:func:`sqlite_template`);
* PostgreSQL: ``CREATE DATABASE x TEMPLATE <migrated template>`` on the suite's server
  (``suite_backends``: ``CRONWHEEL_TEST_POSTGRES_URL``), dropped after the test
  (:func:`fresh_postgres_database`). A server that cannot be reached FAILS the test with a message
  saying so; it is never skipped (opt out locally: ``CRONWHEEL_TEST_POSTGRES_URL= scripts/test``).

Database names carry the worker's id (``suite_workers``), so workers never meet. The fixtures
over these (``store``, ``store_url``, ``postgres_url``...) are in tests/conftest.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import sqlite3
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from cronwheel.store.driver import async_url
from cronwheel.store.migrate import upgrade_database
from suite_backends import POSTGRES_ENV, POSTGRES_URL, suite_postgres_url
from suite_workers import unique_name

# The store contract suite runs once per backend (tests/store); elsewhere ``store`` is SQLite.
BACKENDS = ["sqlite"] + (["postgresql"] if POSTGRES_URL else [])

# -- SQLite ----------------------------------------------------------------------------------------

_sqlite_templates: dict[Path, Path] = {}  # directory -> its migrated template file


def _run(coroutine_function: object, *args: object) -> None:
    """Run an async function to the end on a loop of its own, in a thread: the caller may be
    inside a running event loop (an async fixture)."""
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, coroutine_function(*args)).result()  # type: ignore[operator]


def sqlite_template(directory: Path) -> Path:
    """A SQLite database file at the newest schema revision, migrated once (per worker) in
    ``directory``, checkpointed into one file: copy it, never open it."""
    if directory not in _sqlite_templates:
        path = directory / "migrated.db"
        _run(upgrade_database, f"sqlite:///{path}")
        with contextlib.closing(sqlite3.connect(path)) as connection:
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            connection.execute("PRAGMA journal_mode=DELETE")  # one file, no -wal/-shm beside it
        _sqlite_templates[directory] = path
    return _sqlite_templates[directory]


def fresh_sqlite_database(template_directory: Path, path: Path) -> str:
    """The URL of a new database file at ``path``, copied from the migrated template."""
    shutil.copyfile(sqlite_template(template_directory), path)
    return f"sqlite:///{path}"


# -- PostgreSQL ------------------------------------------------------------------------------------

_probed: dict[str, str | None] = {}  # admin url -> why it cannot be used (None: it can), per worker
_templates: dict[str, str] = {}  # admin url -> name of the migrated template database


async def _postgres_problem() -> str | None:
    """Why the suite's PostgreSQL cannot be used to create test databases, or None."""
    try:
        # a wait for the server, not a measure of it: long enough for a loaded machine
        async with asyncio.timeout(30):
            await suite_postgres_url()  # its database created when missing
    except Exception as error:  # anything: report it, whatever the driver raised
        return f"{type(error).__name__}: {error}"
    return None


async def require_postgres() -> str:
    """The admin URL of the suite's PostgreSQL; unreachable = test failure (never a skip)."""
    assert POSTGRES_URL is not None
    if POSTGRES_URL not in _probed:
        _probed[POSTGRES_URL] = await _postgres_problem()
    problem = _probed[POSTGRES_URL]
    if problem is not None:
        shown = async_url(POSTGRES_URL).set(drivername="postgresql")
        pytest.fail(
            f"PostgreSQL for the store contract suite is unreachable at {shown} ({problem}). "
            f"Start it (CI runs it on 127.0.0.1:5432), point {POSTGRES_ENV} at another server, "
            f"or opt out locally with {POSTGRES_ENV}= (empty).",
            pytrace=False,
        )
    return POSTGRES_URL


async def admin(admin_url: str, statement: str) -> None:
    """Run ``statement`` on the server of ``admin_url`` (autocommit)."""
    engine = create_async_engine(async_url(admin_url), isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as connection:
            await connection.execute(text(statement))
    finally:
        await engine.dispose()


def _database_url(admin_url: str, name: str) -> str:
    return async_url(admin_url).set(database=name).render_as_string(hide_password=False)


async def _migrated_template(admin_url: str) -> str:
    if admin_url not in _templates:
        name = unique_name("cronwheel_test_template")
        await admin(admin_url, f'CREATE DATABASE "{name}"')
        _templates[admin_url] = name
        await upgrade_database(_database_url(admin_url, name))
    return _templates[admin_url]


def drop_templates() -> None:
    """Drop this worker's template databases (at the end of its session)."""
    for admin_url, name in _templates.items():
        _run(admin, admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    _templates.clear()


@contextlib.asynccontextmanager
async def fresh_postgres_database(*, migrated: bool) -> AsyncIterator[str]:
    """A new database on the suite's server (its URL), dropped afterwards: empty, or
    ``migrated`` to the newest schema revision (a copy of the worker's migrated template)."""
    admin_url = await require_postgres()
    template = f' TEMPLATE "{await _migrated_template(admin_url)}"' if migrated else ""
    name = unique_name("cronwheel_test")
    await admin(admin_url, f'CREATE DATABASE "{name}"{template}')
    try:
        yield _database_url(admin_url, name)
    finally:
        await admin(admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

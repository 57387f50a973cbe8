"""Backends for the store contract suite.

Every test that takes ``store`` (or ``store_url``, ``empty_store_url``) runs once per available
backend:

* ``sqlite``: a fresh database file in the test's ``tmp_path`` (always);
* ``postgresql``: a fresh database per test on the suite's PostgreSQL server (``suite_backends``:
  ``CRONWHEEL_TEST_POSTGRES_URL``, an administrative URL that must be allowed to CREATE DATABASE,
  by default ``postgresql://postgres@127.0.0.1:5432/cronwheel_test``, a database of the suite's own
  created when missing), dropped afterwards. So the PostgreSQL half of the suite runs in every
  ``scripts/test`` run: a server that cannot be reached FAILS those tests with a message saying
  so; they are never skipped. To opt out locally, set the variable explicitly empty:
  ``CRONWHEEL_TEST_POSTGRES_URL= scripts/test``.

``store_url`` is a database at the newest schema revision (PostgreSQL: copied from a template
migrated once per session, which is much faster than migrating each one); ``empty_store_url`` has
no tables at all (the migration tests).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from cronwheel.clock import ManualClock
from cronwheel.store import Store
from cronwheel.store.driver import async_url
from cronwheel.store.migrate import upgrade_database
from cronwheel.store.sql import SqlStore, open_store
from suite_backends import POSTGRES_ENV, POSTGRES_URL, suite_postgres_url

from .support import START

BACKENDS = ["sqlite"] + (["postgresql"] if POSTGRES_URL else [])


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


# -- the PostgreSQL server -----------------------------------------------------------------------

_probed: dict[str, str | None] = {}  # admin url -> why it cannot be used (None: it can), per session
_templates: dict[str, str] = {}  # admin url -> name of the migrated template database


async def _postgres_problem() -> str | None:
    """Why the suite's PostgreSQL cannot be used to create test databases, or None."""
    try:
        async with asyncio.timeout(10):
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


async def _admin(admin_url: str, statement: str) -> None:
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
        name = f"cronwheel_test_template_{uuid.uuid4().hex[:12]}"
        await _admin(admin_url, f'CREATE DATABASE "{name}"')
        _templates[admin_url] = name
        await upgrade_database(_database_url(admin_url, name))
    return _templates[admin_url]


def pytest_sessionfinish(session: pytest.Session) -> None:
    for admin_url, name in _templates.items():
        asyncio.run(_admin(admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    _templates.clear()


@contextlib.asynccontextmanager
async def fresh_postgres_database(*, migrated: bool) -> AsyncIterator[str]:
    """A new database on the suite's server (its URL), dropped afterwards: empty, or
    ``migrated`` to the newest schema revision."""
    admin_url = await require_postgres()
    template = f' TEMPLATE "{await _migrated_template(admin_url)}"' if migrated else ""
    name = f"cronwheel_test_{uuid.uuid4().hex[:12]}"
    await _admin(admin_url, f'CREATE DATABASE "{name}"{template}')
    try:
        yield _database_url(admin_url, name)
    finally:
        await _admin(admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# -- fixtures ------------------------------------------------------------------------------------


@pytest.fixture
async def store_url(backend: str, tmp_path: Path) -> AsyncIterator[str]:
    """The URL of a fresh database at the newest schema revision (SQLite: a new file, which
    ``open_store`` migrates)."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.db'}"
        return
    async with fresh_postgres_database(migrated=True) as url:
        yield url


@pytest.fixture
async def empty_store_url(backend: str, tmp_path: Path) -> AsyncIterator[str]:
    """The URL of a fresh database without any tables."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.db'}"
        return
    async with fresh_postgres_database(migrated=False) as url:
        yield url


@pytest.fixture
async def postgres_url() -> AsyncIterator[str]:
    """A fresh PostgreSQL database at the newest revision, for the tests of what only
    PostgreSQL has (LISTEN/NOTIFY). Skipped only when PostgreSQL was opted out explicitly."""
    if POSTGRES_URL is None:
        pytest.skip(f"PostgreSQL opted out ({POSTGRES_ENV} is set empty)")
    async with fresh_postgres_database(migrated=True) as url:
        yield url


@pytest.fixture
def unreachable_url(backend: str, tmp_path: Path) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'no such directory' / 'store.db'}"
    return "postgresql://nobody@127.0.0.1:1/nothing"  # port 1: connection refused


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
async def store(store_url: str, clock: ManualClock) -> AsyncIterator[SqlStore]:
    opened = await open_store(store_url, clock=clock)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
async def postgres_store(postgres_url: str, clock: ManualClock) -> AsyncIterator[SqlStore]:
    opened = await open_store(postgres_url, clock=clock)
    try:
        yield opened
    finally:
        await opened.close()


def _conforms(store: SqlStore) -> Store:
    """mypy proves here that SqlStore implements the Store protocol."""
    return store

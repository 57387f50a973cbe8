"""Backends for the store contract suite.

Every test that takes ``store`` (or ``store_url``) runs once per available backend:

* ``sqlite``: a fresh database file in the test's ``tmp_path`` (always);
* ``postgresql``: a fresh database per test on the live server named by the environment variable
  ``CRONWHEEL_TEST_POSTGRES_URL`` (e.g. ``postgresql://postgres@127.0.0.1:5432/postgres``; needs
  asyncpg), dropped afterwards. Without the variable the backend is not collected.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from cronwheel.clock import ManualClock
from cronwheel.store import Store
from cronwheel.store.driver import async_url
from cronwheel.store.sql import SqlStore, open_store

from .support import START

POSTGRES_ADMIN_URL = os.environ.get("CRONWHEEL_TEST_POSTGRES_URL")
BACKENDS = ["sqlite"] + (["postgresql"] if POSTGRES_ADMIN_URL else [])


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


async def _postgres_database(name: str, create: bool) -> None:
    assert POSTGRES_ADMIN_URL is not None
    admin = create_async_engine(async_url(POSTGRES_ADMIN_URL), isolation_level="AUTOCOMMIT")
    try:
        async with admin.connect() as connection:
            if create:
                await connection.execute(text(f'CREATE DATABASE "{name}"'))
            else:
                await connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        await admin.dispose()


@pytest.fixture
async def store_url(backend: str, tmp_path: Path) -> AsyncIterator[str]:
    """The URL of a fresh, empty database."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.db'}"
        return
    assert POSTGRES_ADMIN_URL is not None
    name = f"cronwheel_test_{uuid.uuid4().hex[:12]}"
    await _postgres_database(name, create=True)
    try:
        yield async_url(POSTGRES_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        await _postgres_database(name, create=False)


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


def _conforms(store: SqlStore) -> Store:
    """mypy proves here that SqlStore implements the Store protocol."""
    return store

"""Backends for the store contract suite.

Every test here that takes ``store`` (or ``store_url``, ``empty_store_url``) runs once per
available backend (``backend`` below overrides tests/conftest.py's SQLite-only one):

* ``sqlite``: a fresh database file in the test's ``tmp_path`` (always);
* ``postgresql``: a fresh database per test on the suite's PostgreSQL server (``suite_backends``:
  ``CRONWHEEL_TEST_POSTGRES_URL``, an administrative URL that must be allowed to CREATE DATABASE,
  by default ``postgresql://postgres@127.0.0.1:5432/cronwheel_test``, a database of the suite's own
  created when missing), dropped afterwards. So the PostgreSQL half of the suite runs in every
  ``scripts/test`` run: a server that cannot be reached FAILS those tests with a message saying
  so; they are never skipped. To opt out locally, set the variable explicitly empty:
  ``CRONWHEEL_TEST_POSTGRES_URL= scripts/test``.

``store_url`` (tests/conftest.py) is a database at the newest schema revision, copied from a
template migrated once per worker (``suite_stores``), which is much faster than migrating each
one; ``empty_store_url`` has no tables at all (the migration tests).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cronwheel.clock import ManualClock
from cronwheel.store import Store
from cronwheel.store.sql import SqlStore
from suite_stores import BACKENDS, fresh_postgres_database

from .support import START

__all__ = ["BACKENDS"]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
async def empty_store_url(backend: str, tmp_path: Path) -> AsyncIterator[str]:
    """The URL of a fresh database without any tables."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.db'}"
        return
    async with fresh_postgres_database(migrated=False) as url:
        yield url


@pytest.fixture
def unreachable_url(backend: str, tmp_path: Path) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'no such directory' / 'store.db'}"
    return "postgresql://nobody@127.0.0.1:1/nothing"  # port 1: connection refused


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


def _conforms(store: SqlStore) -> Store:
    """mypy proves here that SqlStore implements the Store protocol."""
    return store

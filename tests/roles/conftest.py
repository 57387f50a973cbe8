"""Fixtures of the role tests: a fresh SQLite store per test (tests/conftest.py's ``store``), the
roles wired around it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from cronwheel.clock import ManualClock
from cronwheel.store.sql import SqlStore

from . import targets
from .harness import START, Roles, build


@pytest.fixture(autouse=True)
def _fresh_calls() -> Iterator[None]:
    targets.reset()
    yield
    targets.reset()


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "cronwheel.db"  # the name a server gives it (tests look for its files)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
async def roles(clock: ManualClock, store: SqlStore) -> AsyncIterator[Roles]:
    wired = build(clock, store)
    try:
        yield wired
    finally:
        await wired.executors.close()
        await wired.queue.close()

"""Fixtures of the role tests: a fresh SQLite store per test, the roles wired around it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from cronwheel.clock import ManualClock
from cronwheel.store.sql import SqlStore, open_store

from . import targets
from .harness import START, Roles, build


@pytest.fixture(autouse=True)
def _fresh_calls() -> Iterator[None]:
    targets.reset()
    yield
    targets.reset()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'cronwheel.db'}"


@pytest.fixture
async def store(store_url: str, clock: ManualClock) -> AsyncIterator[SqlStore]:
    opened = await open_store(store_url, clock=clock)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
async def roles(clock: ManualClock, store: SqlStore) -> AsyncIterator[Roles]:
    wired = build(clock, store)
    try:
        yield wired
    finally:
        await wired.executors.close()
        await wired.queue.close()

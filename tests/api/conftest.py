"""The API in-process (httpx over ASGI) on a real SqlStore (a tmp SQLite file) and a manual
clock. The queue is a recording double: the API only publishes triggers for manual runs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from cronwheel.api.app import ApiServices, create_app, store_readiness
from cronwheel.clock import ManualClock
from cronwheel.service import ChangeFeed, JobService, TargetPolicy
from cronwheel.store.sql import SqlStore, open_store

from .doubles import RecordingQueue

START = datetime(2026, 3, 2, 12, 0, 0, tzinfo=UTC)  # a Monday


class Readiness:
    """Readiness checks a test can flip."""

    def __init__(self, store: SqlStore) -> None:
        self.store_check = store_readiness(store)
        self.extra: dict[str, bool] = {}

    async def __call__(self) -> dict[str, bool]:
        return {**await self.store_check(), **self.extra}


class Env:
    def __init__(
        self, store: SqlStore, clock: ManualClock, queue: RecordingQueue, readiness: Readiness
    ) -> None:
        self.store = store
        self.clock = clock
        self.queue = queue
        self.readiness = readiness
        self.feed = ChangeFeed()
        self.changes = self.feed.subscribe()
        self.service = JobService(
            store, queue, self.feed, clock, TargetPolicy(allow_commands=False, python_allow=("myapp.*",))
        )
        self.app = create_app(ApiServices(store, self.service, clock, readiness))


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    clock = ManualClock(START)
    store = await open_store(f"sqlite:///{tmp_path / 'cronwheel.db'}", clock=clock)
    try:
        yield Env(store, clock, RecordingQueue(), Readiness(store))
    finally:
        await store.close()


@pytest.fixture
async def client(env: Env) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=env.app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://cronwheel.test") as http:
        yield http


def job_body(name: str = "nightly", team: str = "data", **changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "team": team,
        "name": name,
        "schedule": "0 3 * * *",
        "timezone": "Europe/Berlin",
        "target": {
            "type": "http",
            "url": "https://hooks.example.com/nightly",
            "headers": {"X-Token": "s3cret"},
        },
        "labels": {"tier": "gold"},
    }
    body.update(changes)
    return body

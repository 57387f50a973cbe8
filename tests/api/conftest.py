"""The API in-process (httpx over ASGI) on a real SqlStore (a tmp SQLite file) and a manual
clock. The queue is a recording double: the API only publishes triggers for manual runs.

The app serves the host ``cronwheel.test`` (as an operator's ``--allowed-host`` would), and the
``client`` fixture is authenticated with an admin token of every team (``env.admin_token``);
:func:`issue_token` makes others (``anonymous`` is a client without one)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from cronwheel.api.app import AccessPolicy, ApiServices, create_app, store_readiness
from cronwheel.auth.identity import Scope
from cronwheel.auth.tokens import issue
from cronwheel.clock import ManualClock
from cronwheel.jobs.service import ChangeFeed, JobService, TargetPolicy
from cronwheel.store.sql import SqlStore, open_store
from suite_stores import fresh_sqlite_database

from .doubles import RecordingQueue

START = datetime(2026, 3, 2, 12, 0, 0, tzinfo=UTC)  # a Monday
BASE_URL = "http://cronwheel.test"
SERVED = AccessPolicy(allowed_hosts=("cronwheel.test",))
# The Content-Type each kind of static asset may be served with (a module script needs a JavaScript one).
TYPES = {".js": ("text/javascript", "application/javascript"), ".css": ("text/css",), ".png": ("image/png",)}


async def issue_token(
    store: SqlStore,
    *scopes: Scope,
    team: str | None = None,
    name: str = "test",
    expires_at: datetime | None = None,
) -> str:
    """A token stored in ``store`` (of every team when ``team`` is None); returns its text."""
    record, text = issue(name, team, scopes or (Scope.ADMIN,), START, expires_at=expires_at)
    await store.create_token(record)
    return text


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


class Readiness:
    """Readiness checks a test can flip."""

    def __init__(self, store: SqlStore) -> None:
        self.store_check = store_readiness(store)
        self.extra: dict[str, bool] = {}

    async def __call__(self) -> dict[str, bool]:
        return {**await self.store_check(), **self.extra}


class Env:
    def __init__(
        self,
        store: SqlStore,
        clock: ManualClock,
        queue: RecordingQueue,
        readiness: Readiness,
        admin_token: str,
        access: AccessPolicy = SERVED,
    ) -> None:
        self.store = store
        self.admin_token = admin_token
        self.clock = clock
        self.queue = queue
        self.readiness = readiness
        self.feed = ChangeFeed()
        self.changes = self.feed.subscribe()
        self.service = JobService(
            store, queue, self.feed, clock, TargetPolicy(allow_commands=False, python_allow=("myapp.*",))
        )
        services = ApiServices(store, self.service, clock, readiness, access=access, changes=self.feed)
        self.app = create_app(services)

    def client(self, token: str | None = None) -> httpx.AsyncClient:
        """A client of this app, authenticated with ``token`` (None: no token)."""
        transport = httpx.ASGITransport(app=self.app, raise_app_exceptions=False)
        headers = {} if token is None else bearer(token)
        return httpx.AsyncClient(transport=transport, base_url=BASE_URL, headers=headers)


@pytest.fixture
async def env(tmp_path: Path, store_templates: Path) -> AsyncIterator[Env]:
    clock = ManualClock(START)
    # a copy of the worker's migrated database (tests/conftest.py)
    store = await open_store(fresh_sqlite_database(store_templates, tmp_path / "cronwheel.db"), clock=clock)
    try:
        admin = await issue_token(store, Scope.ADMIN, name="test-admin")
        yield Env(store, clock, RecordingQueue(), Readiness(store), admin)
    finally:
        await store.close()


@pytest.fixture
async def client(env: Env) -> AsyncIterator[httpx.AsyncClient]:
    """Authenticated as an admin of every team."""
    async with env.client(env.admin_token) as http:
        yield http


@pytest.fixture
async def anonymous(env: Env) -> AsyncIterator[httpx.AsyncClient]:
    """No token at all."""
    async with env.client() as http:
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
            "headers": {"X-Team": "data"},
        },
        "labels": {"tier": "gold"},
    }
    body.update(changes)
    return body

"""The whole run is isolated from the user's own cronwheel: home, working directory and CRONWHEEL_*
settings of its own (``suite_isolation``); PostgreSQL and Redis databases of its own
(``suite_backends``); under pytest-xdist, each worker apart from the others (``suite_workers``).

The one ``store`` fixture of the suite is here: a fresh store per test, copied from a database
migrated once per worker (``suite_stores``). It is SQLite; tests/store runs it on every backend
(its ``backend`` fixture is parametrised over SQLite and PostgreSQL). A folder or module moves
the store's clock by overriding ``clock`` (or ``store_clock``: None, the store's own clock)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cronwheel.clock import ManualClock
from cronwheel.store.sql import SqlStore, open_store
from suite_backends import POSTGRES_ENV, POSTGRES_URL
from suite_isolation import ISOLATION, Isolation, begin, end
from suite_stores import drop_templates, fresh_postgres_database, fresh_sqlite_database

START = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)  # a Monday, on the minute


def _xdist_controller(config: pytest.Config) -> bool:
    """The process of ``pytest -n N`` that only hands tests to its workers (and runs none)."""
    return not hasattr(config, "workerinput") and config.getoption("dist", "no") != "no"


def pytest_configure(config: pytest.Config) -> None:
    # Each xdist worker isolates itself. The controller does not: its workers start in its
    # working directory and find the project's configuration there.
    if not _xdist_controller(config):
        config.stash[ISOLATION] = begin(config.invocation_params.dir)


# Folders whose tests share session-scoped servers of their own: under ``--dist loadgroup``
# (scripts/test) each folder's tests run on one worker, which starts those servers once; spread
# over every worker, each would start them (tests/transport: a private PostgreSQL cluster, made by
# initdb, a Redis and an etcd, all over TLS).
SHARED_SERVERS = {"transport"}
# Slow by what they start (seconds each, whatever the test then does): an etcd of the test's own,
# or three, that it kills and restarts; and the transport tests' private TLS servers (initdb).
SLOW_FIXTURES = {"own_etcd", "own_etcd_cluster"}
SLOW_FOLDERS = {"transport"}
# The test of minutes (a whole cluster under faults, mostly waiting) starts first, beside the
# tests that keep a core busy: started last, it would leave the other worker idle while it ran.
FIRST = {"chaos"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test that starts the real server in a subprocess (``integration``) is ``slow`` too, and
    so is one of ``SLOW_FIXTURES`` or ``SLOW_FOLDERS``: ``scripts/test --fast`` leaves them out.
    Tests of a folder of ``SHARED_SERVERS`` share an ``xdist_group``; those of ``FIRST`` go first."""
    tests = Path(__file__).parent
    for item in items:
        folder = _folder(item, tests)
        fixtures = set(getattr(item, "fixturenames", ()))
        if item.get_closest_marker("integration") or fixtures & SLOW_FIXTURES or folder in SLOW_FOLDERS:
            item.add_marker(pytest.mark.slow)
        if folder in SHARED_SERVERS:
            item.add_marker(pytest.mark.xdist_group(folder))
    items.sort(key=lambda item: _folder(item, tests) not in FIRST)  # stable: else as collected


def _folder(item: pytest.Item, tests: Path) -> str:
    return item.path.relative_to(tests).parts[0] if item.path.is_relative_to(tests) else ""


def pytest_sessionfinish(session: pytest.Session) -> None:
    drop_templates()  # this worker's migrated PostgreSQL template, if it made one


def pytest_unconfigure(config: pytest.Config) -> None:
    isolation = config.stash.get(ISOLATION, None)
    if isolation is not None:
        end(isolation)
        del config.stash[ISOLATION]


@pytest.fixture(scope="session")
def isolation(pytestconfig: pytest.Config) -> Isolation:
    """The run's own home and working directory, and what they replaced."""
    return pytestconfig.stash[ISOLATION]


# -- stores ----------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def store_templates(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where this worker keeps its migrated SQLite template (``suite_stores.sqlite_template``)."""
    return tmp_path_factory.mktemp("store-template")


@pytest.fixture
def backend() -> str:
    """The store's backend: SQLite (tests/store overrides it with every backend)."""
    return "sqlite"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def store_clock(clock: ManualClock) -> ManualClock | None:
    """The clock the store fills timestamps with (None: its own, the system's)."""
    return clock


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    """Where a SQLite ``store`` keeps its file."""
    return tmp_path / "store.db"


@pytest.fixture
async def store_url(backend: str, store_path: Path, store_templates: Path) -> AsyncIterator[str]:
    """The URL of a fresh database at the newest schema revision, of the test's own: a copy of
    the worker's migrated template (SQLite: the file ``store_path``; PostgreSQL: a database,
    dropped afterwards)."""
    if backend == "sqlite":
        yield fresh_sqlite_database(store_templates, store_path)
        return
    async with fresh_postgres_database(migrated=True) as url:
        yield url


@pytest.fixture
async def store(store_url: str, store_clock: ManualClock | None) -> AsyncIterator[SqlStore]:
    opened = await open_store(store_url, clock=store_clock)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
async def postgres_url() -> AsyncIterator[str]:
    """A fresh PostgreSQL database at the newest revision, for the tests of what only
    PostgreSQL has (LISTEN/NOTIFY). Skipped only when PostgreSQL was opted out explicitly."""
    if POSTGRES_URL is None:
        pytest.skip(f"PostgreSQL opted out ({POSTGRES_ENV} is set empty)")
    async with fresh_postgres_database(migrated=True) as url:
        yield url


@pytest.fixture
async def postgres_store(postgres_url: str, clock: ManualClock) -> AsyncIterator[SqlStore]:
    opened = await open_store(postgres_url, clock=clock)
    try:
        yield opened
    finally:
        await opened.close()

"""Bounded waits for PostgreSQL (``driver.PostgresTimeouts``), on the live server behind a TCP
forwarder that can turn into a black hole: it keeps accepting connections and reading what
arrives, and drops it, never answering and never resetting (a network that silently loses
packets). A connect, a pre-ping or a statement through it must fail with ``TransientError`` within
its timeout, and once the link heals the same store must work again (the connection that timed
out was not put back into the pool)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterator

import pytest
from sqlalchemy import DDL, text
from sqlalchemy.engine import make_url

from cronwheel.errors import InvalidInputError, TransientError
from cronwheel.store.change_listener import listener_dsn
from cronwheel.store.driver import PostgresTimeouts, async_url, create_engine, translated_errors
from cronwheel.store.sql import SqlStore, open_store

from .support import make_job

TIMEOUT_S = 1.0  # the connect and command timeouts the tests configure
SLACK_S = 1.0  # what a loaded 2-core machine may add to a timeout before the error arrives


class Forwarder:
    """Forwards 127.0.0.1:<port> to PostgreSQL, or swallows everything while ``black_hole``.

    A connection that lost bytes to the black hole stays dead after the switch back (what it
    dropped cannot be replayed); only new connections pass again."""

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.black_hole = False
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._handlers: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.close()  # the pumps see EOF and end
        await asyncio.gather(*self._handlers, return_exceptions=True)
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        self._writers.add(writer)
        try:
            if self.black_hole:
                while await reader.read(65536):
                    pass
                return
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
            self._writers.add(up_writer)
            dead = [False]
            await asyncio.gather(self._pump(reader, up_writer, dead), self._pump(up_reader, writer, dead))
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()
            self._handlers.discard(task)

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter, dead: list[bool]) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while data := await source.read(65536):
                dead[0] = dead[0] or self.black_hole
                if not dead[0]:
                    sink.write(data)
                    await sink.drain()
        sink.close()


@pytest.fixture
async def forwarder(postgres_url: str) -> AsyncIterator[Forwarder]:
    url = make_url(postgres_url)
    forwarder = Forwarder(url.host or "127.0.0.1", url.port or 5432)
    await forwarder.start()
    try:
        yield forwarder
    finally:
        await forwarder.close()


@pytest.fixture
def linked_url(postgres_url: str, forwarder: Forwarder) -> str:
    """The test database through the forwarder, with short timeouts."""
    url = make_url(postgres_url).set(host="127.0.0.1", port=forwarder.port)
    url = url.update_query_dict({"connect_timeout": str(TIMEOUT_S), "command_timeout": str(TIMEOUT_S)})
    return url.render_as_string(hide_password=False)


@contextlib.contextmanager
def takes_about(seconds: float) -> Iterator[None]:
    """The block ends no sooner than (nearly) ``seconds`` and not much later."""
    started = time.monotonic()
    yield
    elapsed = time.monotonic() - started
    assert seconds * 0.9 <= elapsed < seconds + SLACK_S, f"took {elapsed:.2f} s, not about {seconds} s"


@contextlib.contextmanager
def quick() -> Iterator[None]:
    """The block does not wait for any timeout."""
    started = time.monotonic()
    yield
    elapsed = time.monotonic() - started
    assert elapsed < TIMEOUT_S * 0.9, f"took {elapsed:.2f} s: something waited for a timeout"


async def heals(store: SqlStore, forwarder: Forwarder) -> None:
    """After the switch back, the very next operations succeed at once: the connection that timed
    out was discarded, not pooled."""
    forwarder.black_hole = False
    with quick():
        assert await store.find_job("ops", "nothing") is None
        job = await store.create_job(make_job())
        assert (await store.get_job(job.id)).id == job.id
    assert store.engine.sync_engine.pool.checkedout() == 0  # type: ignore[attr-defined]


# -- through the black hole ----------------------------------------------------------------------


async def test_connect_through_a_black_hole_times_out(forwarder: Forwarder, linked_url: str) -> None:
    forwarder.black_hole = True
    with takes_about(TIMEOUT_S), pytest.raises(TransientError, match="did not answer in time"):
        await open_store(linked_url)  # opens its first connection to migrate


async def test_checkout_of_a_connection_behind_a_black_hole_times_out_then_heals(
    forwarder: Forwarder, linked_url: str
) -> None:
    """The pooled connection's pre-ping meets the black hole."""
    store = await open_store(linked_url)
    try:
        assert await store.find_job("ops", "nothing") is None  # one connection, now idle in the pool
        forwarder.black_hole = True
        with takes_about(TIMEOUT_S), pytest.raises(TransientError, match="did not answer in time"):
            await store.find_job("ops", "nothing")
        await heals(store, forwarder)
    finally:
        await store.close()


async def test_statement_on_a_black_holed_link_times_out_then_heals(
    forwarder: Forwarder, linked_url: str
) -> None:
    """The link fails in the middle of a transaction, between two statements."""
    store = await open_store(linked_url)
    try:
        async with store.engine.connect() as connection:
            assert await connection.scalar(text("SELECT 1")) == 1
            forwarder.black_hole = True
            with (
                takes_about(TIMEOUT_S),
                pytest.raises(TransientError, match="did not answer in time"),
                translated_errors(),
            ):
                await connection.execute(text("SELECT 2"))
        await heals(store, forwarder)
    finally:
        await store.close()


async def test_still_black_holed_store_keeps_failing_in_time(forwarder: Forwarder, linked_url: str) -> None:
    """While the link stays down every operation fails within its timeout (a new connection
    meets the connect timeout); nothing hangs and nothing piles up in the pool."""
    store = await open_store(linked_url)
    try:
        forwarder.black_hole = True
        for _ in range(2):
            with takes_about(TIMEOUT_S), pytest.raises(TransientError):
                await store.find_job("ops", "nothing")
        await heals(store, forwarder)
    finally:
        await store.close()


# -- schema changes get the migration timeout ----------------------------------------------------


async def test_ddl_gets_the_migration_timeout_and_other_statements_the_command_timeout(
    postgres_url: str,
) -> None:
    url = make_url(postgres_url).update_query_dict({"command_timeout": "0.5", "migration_timeout": "10"})
    engine = create_engine(url)
    try:
        async with engine.connect() as connection:
            slow = DDL("CREATE TABLE slow_ddl AS SELECT 1 AS x FROM pg_sleep(1)")  # type: ignore[no-untyped-call]
            await connection.execute(slow)  # a schema change may outlast the command timeout
            assert await connection.scalar(text("SELECT count(*) FROM slow_ddl")) == 1
            await connection.commit()
            with takes_about(0.5), pytest.raises(TransientError), translated_errors():
                await connection.execute(text("SELECT pg_sleep(1)"))  # back to the command timeout
        async with engine.connect() as connection:  # and the pool still works
            assert await connection.scalar(text("SELECT count(*) FROM slow_ddl")) == 1
    finally:
        await engine.dispose()


# -- configuration -------------------------------------------------------------------------------


def test_defaults() -> None:
    assert PostgresTimeouts.from_query({}) == PostgresTimeouts(
        connect_timeout_s=10.0, command_timeout_s=30.0, pool_timeout_s=30.0, migration_timeout_s=600.0
    )
    assert PostgresTimeouts.parameters() == (
        "connect_timeout",
        "command_timeout",
        "pool_timeout",
        "migration_timeout",
    )


def test_url_parameters_are_read_and_removed() -> None:
    url = (
        "postgresql://u:pw@db.example:5433/cron?sslmode=require&connect_timeout=2.5&command_timeout=60"
        "&pool_timeout=5&migration_timeout=3600&passfile=/etc/pgpass"
    )
    assert PostgresTimeouts.from_query(make_url(url).query) == PostgresTimeouts(2.5, 60.0, 5.0, 3600.0)
    # asyncpg never sees ours, nor sslmode (its `ssl` argument: cronwheel.store.pg_connect)
    assert dict(async_url(url).query) == {"passfile": "/etc/pgpass"}
    assert "timeout" not in listener_dsn(url)
    engine = create_engine(url)
    assert engine.sync_engine.pool.timeout() == 5.0  # type: ignore[attr-defined]


@pytest.mark.parametrize("value", ["0", "-1", "abc", "inf", "nan"])
def test_bad_values_are_refused(value: str) -> None:
    with pytest.raises(InvalidInputError, match="command_timeout must be a positive number of seconds"):
        create_engine(f"postgresql://u@h/db?command_timeout={value}")


def test_repeated_parameter_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="connect_timeout"):
        async_url("postgresql://u@h/db?connect_timeout=1&connect_timeout=2")


def test_sqlite_refuses_postgresql_timeouts(tmp_path: object) -> None:
    with pytest.raises(InvalidInputError, match="command_timeout: timeouts of PostgreSQL stores"):
        create_engine(f"sqlite:///{tmp_path}/x.db?command_timeout=5")

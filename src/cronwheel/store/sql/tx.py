"""The store's connections and transactions, shared by every module of :mod:`cronwheel.store.sql`.

Every method of ``SqlStore`` is one of three kinds of connection (:class:`Transactions`): a read,
a write transaction, or a write whose statements each commit on their own. How each is opened on
each database is decided by the :class:`~cronwheel.store.driver.Flavor`; the other modules never
ask which database they are on. Batch writes of runs lock rows in id order and run again when
PostgreSQL aborted them for a concurrent one (:func:`retry_lost_races`).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from cronwheel.errors import RaceLostError
from cronwheel.store import sqlite_cursor
from cronwheel.store.change_listener import CHANNEL
from cronwheel.store.driver import WRITE, flavor_of, translated_errors

T = TypeVar("T")
K = TypeVar("K")
V = TypeVar("V")

CHUNK = 500  # rows per statement for IN lists and batched conditional updates
RACE_RETRIES = 3  # batch writes of runs run again at once this many times when they lose a race


class Transactions:
    """Opens the store's connections (see the module docstring). ``serialize_writes`` (default:
    on where the database allows one writer, SQLite) runs this store's write transactions one at
    a time under an ``asyncio.Lock``; reads never take it (WAL readers do not block the writer)."""

    def __init__(self, engine: AsyncEngine, serialize_writes: bool | None = None) -> None:
        self.engine = engine
        self.flavor = flavor_of(engine.dialect)
        if serialize_writes is None:
            serialize_writes = self.flavor.one_writer
        self._write_lock = asyncio.Lock() if serialize_writes else None

    @property
    def write_concurrency(self) -> int:
        """Write transactions worth running at once: 1 where they are serialized, else 2 (a third
        gained little on two cores: a 20k cluster herd, ``benchmarks/bench_fire.py``, was queued
        in 4.6 s one batch at a time, 2.5-2.7 s two at a time, 2.4 s three)."""
        return 1 if self._write_lock is not None else 2

    @contextlib.asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        """A connection for reads: autocommit where each statement takes its own snapshot anyway
        (PostgreSQL: a transaction around them only cost two more round trips, BEGIN and
        ROLLBACK); one transaction, one snapshot, where that is free (SQLite)."""
        with translated_errors():
            async with self.engine.connect() as connection:
                if self.flavor.autocommit:
                    await connection.execution_options(isolation_level="AUTOCOMMIT")
                yield connection

    @contextlib.asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncConnection]:
        """One write transaction: everything in it commits, or nothing."""
        with translated_errors():
            async with self._serialized(), self.engine.connect() as connection:
                await connection.execution_options(**WRITE)
                async with connection.begin():
                    yield connection

    @contextlib.asynccontextmanager
    async def write_each(self) -> AsyncIterator[AsyncConnection]:
        """For writes whose statements need no common transaction (each commits on its own):
        one round trip per statement in autocommit; elsewhere the usual write transaction."""
        if not self.flavor.autocommit:
            async with self.write() as connection:
                yield connection
            return
        with translated_errors():
            async with self.engine.connect() as connection:
                await connection.execution_options(isolation_level="AUTOCOMMIT")
                yield connection

    @property
    def statements_commit_alone(self) -> bool:
        """Whether a write that one statement makes can be a transaction of its own, with no
        BEGIN and COMMIT around it (:meth:`write_alone`): where statements run in autocommit and
        a statement can write several tables (PostgreSQL's data-modifying ``WITH``)."""
        return self.flavor.autocommit and self.flavor.writes_in_with

    async def write_alone(self, step: Callable[[AsyncConnection], Awaitable[T]]) -> T:
        """``step``, one statement that is a whole write transaction, committed on its own (one
        round trip where BEGIN, the statement and COMMIT took three; see
        :attr:`statements_commit_alone`), run again when it loses a race (:func:`retry_lost_races`)."""

        async def write() -> T:
            async with self.write_each() as connection:
                return await step(connection)

        return await retry_lost_races(write)

    async def write_on_driver(self, work: Callable[[sqlite3.Cursor], T]) -> T:
        """``work`` as one write transaction run whole on the driver's own thread with its own
        cursor, where the database lives in this process (``Flavor.in_process``: SQLite, see
        :mod:`cronwheel.store.sql.lite`); serialized with the other writes."""
        with translated_errors():
            async with self._serialized(), self.engine.connect() as connection:
                return await sqlite_cursor.write_transaction(connection, work)

    def _serialized(self) -> contextlib.AbstractAsyncContextManager[Any]:
        return self._write_lock if self._write_lock is not None else contextlib.nullcontext()

    async def server_time(
        self, stamp: Callable[[], float], now: Callable[[], datetime], samples: int
    ) -> list[tuple[float, datetime, float]]:
        """The database's clock, bracketed by ``stamp()`` (see ``Store.server_time``); a database
        in this process answers with ``now()``, the process clock."""
        if not self.flavor.remote_clock:
            return [(stamp(), now(), stamp())]
        found = []
        async with self.read() as connection:
            for _ in range(max(1, samples)):
                sent = stamp()
                value = (await connection.execute(text("SELECT clock_timestamp()"))).scalar_one()
                received = stamp()
                assert isinstance(value, datetime)
                found.append((sent, value.astimezone(UTC), received))
        return found

    async def write_batches(
        self,
        items: Sequence[T],
        step: Callable[[AsyncConnection, Sequence[T]], Awaitable[dict[K, V]]],
        then: Callable[[AsyncConnection, dict[K, V]], Awaitable[None]] | None = None,
    ) -> dict[K, V]:
        """``step`` over ``items``, :data:`CHUNK` at a time in the caller's order (give id order:
        the lock order of every batch write of runs), then ``then`` once with the union of what
        the steps returned (the transaction's last write), in one write transaction that runs
        again when it loses a race (:func:`retry_lost_races`). Returns that union."""

        async def write() -> dict[K, V]:
            found: dict[K, V] = {}
            async with self.write() as connection:
                for chunk in chunks(items, CHUNK):
                    found.update(await step(connection, chunk))
                if then is not None:
                    await then(connection, found)
            return found

        return await retry_lost_races(write)


async def retry_lost_races(write: Callable[[], Awaitable[T]]) -> T:
    """Run a batch write on runs again when PostgreSQL aborted it for a concurrent one (a
    deadlock between two workers' claims, or a claim and the scheduler's queued stamp): the
    transaction wrote nothing, and a worker that gave up would leave its triggers to the queue's
    visibility timeout. The batch writes lock rows in id order, which makes this rare."""
    for _ in range(RACE_RETRIES):
        try:
            return await write()
        except RaceLostError:
            await asyncio.sleep(0)
    return await write()


def chunks(items: Sequence[T], size: int) -> Iterable[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


async def notify_changed(connection: AsyncConnection, job_ids: Iterable[str]) -> None:
    """Tell the other processes that these jobs changed, in the caller's transaction, so that
    listeners hear of it when, and only if, it commits. PostgreSQL: ``pg_notify(CHANNEL,
    job_id)`` for each job (:class:`cronwheel.store.change_listener.PostgresChangeListener` listens);
    SQLite: nothing (embedded mode has the in-process ChangeFeed)."""
    ids = sorted(set(job_ids))
    if ids and flavor_of(connection.dialect).notifies:
        await connection.execute(_NOTIFY, {"channel": CHANNEL, "ids": ids})


_NOTIFY = text("SELECT pg_notify(:channel, id) FROM unnest(CAST(:ids AS text[])) AS id")

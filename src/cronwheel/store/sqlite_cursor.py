"""SQLite statements in one trip to aiosqlite's thread each.

aiosqlite runs every call on the connection's own thread and wakes the event loop for its answer
(a queue, a thread switch and a write to the loop's self-pipe each time). SQLAlchemy's adapter
makes four such calls per statement (open a cursor, execute, fetch the rows, close the cursor):
a worker's claim of a batch took 26 of them, an outcome batch 21. :class:`OneTripCursor` does the
four in one call, on the thread, with the driver's own ``sqlite3`` cursor, and hands SQLAlchemy
the description, rows, row count and last row id it read there.

:func:`install` makes it the cursor of SQLAlchemy's aiosqlite connections (server-side cursors,
which the store never asks for, keep SQLAlchemy's). It relies on ``aiosqlite.Connection._execute``
and ``._conn`` and on SQLAlchemy's cursor adapter, at the versions ``requirements/dev.lock`` pins;
``tests/store`` runs the whole store over it.

:func:`write_transaction` goes one step further for the store's hottest writes: a whole write
transaction, several statements between ``BEGIN IMMEDIATE`` and ``COMMIT``, as one function on
that thread (:mod:`cronwheel.store.sql.lite`).
"""

from __future__ import annotations

import collections
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from sqlalchemy import exc
from sqlalchemy.dialects.sqlite.aiosqlite import AsyncAdapt_aiosqlite_connection
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.util.concurrency import await_

T = TypeVar("T")

_Answer = tuple[Any, list[Any], int, int | None]  # description, rows, row count, last row id


def _run(connection: sqlite3.Connection, operation: str, parameters: Any, many: bool) -> _Answer:
    """On aiosqlite's thread: one statement, its rows read and its cursor closed."""
    cursor = connection.cursor()
    try:
        if many:
            cursor.executemany(operation, parameters)
        elif parameters is None:
            cursor.execute(operation)
        else:
            cursor.execute(operation, parameters)
        description = cursor.description
        rows = cursor.fetchall() if description else []
        return description, rows, cursor.rowcount, cursor.lastrowid
    finally:
        cursor.close()


class OneTripCursor:
    """A DB-API cursor for SQLAlchemy's aiosqlite adapter whose statements each take one trip to
    the driver's thread (see the module docstring)."""

    server_side = False

    def __init__(self, adapt_connection: Any) -> None:
        self._adapt_connection = adapt_connection
        self._connection = adapt_connection._connection  # the aiosqlite.Connection
        self._rows: collections.deque[Any] = collections.deque()
        self.description: Any = None
        self.rowcount = -1
        self.lastrowid: int | None = None
        self.arraysize = 1

    def execute(self, operation: Any, parameters: Any = None) -> None:
        self._go(operation, parameters, many=False)

    def executemany(self, operation: Any, seq_of_parameters: Any) -> None:
        self._go(operation, seq_of_parameters, many=True)

    def _go(self, operation: Any, parameters: Any, many: bool) -> None:
        try:
            await_(self._trip(operation, parameters, many))
        except Exception as error:
            self._adapt_connection._handle_exception(error)

    async def _trip(self, operation: Any, parameters: Any, many: bool) -> None:
        async with self._adapt_connection._execute_mutex:
            answer: _Answer = await self._connection._execute(
                _run, self._connection._conn, operation, parameters, many
            )
        self.description, rows, self.rowcount, self.lastrowid = answer
        self._rows = collections.deque(rows)

    async def _async_soft_close(self) -> None:
        """Nothing to close: the driver's cursor was closed on its thread."""

    def close(self) -> None:
        self._rows.clear()

    def nextset(self) -> None:
        return None

    def setinputsizes(self, *inputsizes: Any) -> None:
        return None

    def __enter__(self) -> OneTripCursor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[Any]:
        while self._rows:
            yield self._rows.popleft()

    def fetchone(self) -> Any:
        return self._rows.popleft() if self._rows else None

    def fetchmany(self, size: int | None = None) -> Sequence[Any]:
        rows = self._rows
        return [rows.popleft() for _ in range(min(size or self.arraysize, len(rows)))]

    def fetchall(self) -> Sequence[Any]:
        rows = list(self._rows)
        self._rows.clear()
        return rows


async def write_transaction(connection: AsyncConnection, work: Callable[[sqlite3.Cursor], T]) -> T:
    """``work`` with a cursor of ``connection``'s ``sqlite3`` connection, on aiosqlite's thread,
    as one write transaction (``BEGIN IMMEDIATE``; ``COMMIT``, or ``ROLLBACK`` when ``work``
    raises); ``connection`` must not be in a transaction of SQLAlchemy's. The driver's errors come
    back as SQLAlchemy's (``DBAPIError``), as those of any statement do."""
    fairy = await connection.get_raw_connection()
    adapted = fairy.dbapi_connection
    assert isinstance(adapted, AsyncAdapt_aiosqlite_connection)
    driver = adapted._connection  # the aiosqlite.Connection
    try:
        async with adapted._execute_mutex:
            answer: T = await driver._execute(_transaction, driver._conn, work)
    except sqlite3.Error as error:
        raise exc.DBAPIError.instance(None, None, error, sqlite3.Error) from error
    return answer


def _transaction(connection: sqlite3.Connection, work: Callable[[sqlite3.Cursor], T]) -> T:
    """On aiosqlite's thread: ``work`` between BEGIN IMMEDIATE and COMMIT."""
    cursor = connection.cursor()
    try:
        cursor.execute("BEGIN IMMEDIATE")
        try:
            answer = work(cursor)
        except BaseException:
            if connection.in_transaction:
                cursor.execute("ROLLBACK")
            raise
        cursor.execute("COMMIT")
        return answer
    finally:
        cursor.close()


def install() -> None:
    """Make :class:`OneTripCursor` the cursor of SQLAlchemy's aiosqlite connections."""
    AsyncAdapt_aiosqlite_connection._cursor_cls = OneTripCursor  # type: ignore[assignment]

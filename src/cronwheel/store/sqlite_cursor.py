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
"""

from __future__ import annotations

import collections
import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy.dialects.sqlite.aiosqlite import AsyncAdapt_aiosqlite_connection
from sqlalchemy.util.concurrency import await_

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


def install() -> None:
    """Make :class:`OneTripCursor` the cursor of SQLAlchemy's aiosqlite connections."""
    AsyncAdapt_aiosqlite_connection._cursor_cls = OneTripCursor  # type: ignore[assignment]

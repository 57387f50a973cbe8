"""SQLite statements take one trip to aiosqlite's thread each (``store/sqlite_cursor.py``), and
SQLAlchemy still sees their rows, row counts and errors as the driver gave them."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiosqlite.core
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from cronwheel.errors import CronwheelError
from cronwheel.store.driver import create_engine, translated_errors


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    made = create_engine(f"sqlite:///{tmp_path / 'trips.db'}")
    async with made.begin() as connection:
        await connection.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT UNIQUE)"))
    yield made
    await made.dispose()


@pytest.fixture
def trips(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The calls made on aiosqlite's thread, by name."""
    made: list[str] = []
    through = aiosqlite.core.Connection._execute

    async def counted(self: aiosqlite.core.Connection, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        made.append(getattr(fn, "__name__", repr(fn)))
        return await through(self, fn, *args, **kw)  # type: ignore[no-untyped-call]

    monkeypatch.setattr(aiosqlite.core.Connection, "_execute", counted)
    return made


async def test_each_statement_is_one_trip_with_its_rows_and_counts(
    engine: AsyncEngine, trips: list[str]
) -> None:
    async with engine.begin() as connection:
        trips.clear()
        await connection.execute(
            text("INSERT INTO t (name) VALUES (:name)"), [{"name": "a"}, {"name": "b"}, {"name": "c"}]
        )
        updated = await connection.execute(text("UPDATE t SET name = name || '!' WHERE name != 'b'"))
        rows = (await connection.execute(text("SELECT id, name FROM t ORDER BY id"))).all()
        returned = (await connection.execute(text("DELETE FROM t WHERE name = 'b' RETURNING id"))).all()
        assert len(trips) == 4  # one per statement
    assert updated.rowcount == 2
    assert [tuple(row) for row in rows] == [(1, "a!"), (2, "b"), (3, "c!")]
    assert [tuple(row) for row in returned] == [(2,)]


async def twice(engine: AsyncEngine) -> None:
    with translated_errors():
        async with engine.begin() as connection:
            await connection.execute(text("INSERT INTO t (name) VALUES ('x')"))
            await connection.execute(text("INSERT INTO t (name) VALUES ('x')"))  # UNIQUE


async def test_a_failing_statement_raises_as_the_driver_said(engine: AsyncEngine) -> None:
    with pytest.raises(CronwheelError):
        await twice(engine)
    async with engine.connect() as connection:
        count = (await connection.execute(text("SELECT count(*) FROM t"))).scalar_one()
    assert count == 0  # the transaction was rolled back

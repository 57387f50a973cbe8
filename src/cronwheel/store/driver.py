"""Everything that differs between database drivers, in one place: URLs, engine and connection
setup, how write transactions begin, insert-or-ignore, and the translation of driver errors into
cronwheel's errors.

SQLite (aiosqlite): every connection gets WAL, ``synchronous=NORMAL``, ``foreign_keys=ON`` and
``busy_timeout=5000``. The driver's own implicit BEGIN is switched off and SQLAlchemy's ``begin``
event emits ``BEGIN`` itself, ``BEGIN IMMEDIATE`` for write transactions (connections given the
:data:`WRITE` execution options): a write transaction then takes SQLite's write lock up front and
waits for it under ``busy_timeout``, instead of failing with "database is locked" when a deferred
transaction that has read tries to upgrade to a writer while another connection writes.

PostgreSQL (asyncpg): plain transactions; conditional writes are safe under READ COMMITTED
because a blocked UPDATE re-checks its WHERE clause against the row it finally locks.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Table, event, exc
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import URL, Connection, Dialect, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.sql.dml import Insert

from cronwheel.errors import (
    BackendUnavailableError,
    ConflictError,
    CronwheelError,
    InvalidInputError,
    NotFoundError,
    TransientError,
)

SQLITE_PRAGMAS = (
    "PRAGMA busy_timeout=5000",  # first: the others may have to wait for a lock
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=NORMAL",
    "PRAGMA foreign_keys=ON",
)

_BEGIN_OPTION = "cronwheel_begin"
WRITE: dict[str, Any] = {_BEGIN_OPTION: "IMMEDIATE"}  # execution options of a write transaction

_ASYNC_DRIVERS = {
    "sqlite": "sqlite+aiosqlite",
    "postgresql": "postgresql+asyncpg",
    "postgres": "postgresql+asyncpg",
}


def async_url(url: str | URL) -> URL:
    """The URL with its async driver: ``sqlite:///x.db`` -> ``sqlite+aiosqlite:///x.db``,
    ``postgresql://...`` -> ``postgresql+asyncpg://...``. In-memory SQLite is refused (every
    pooled connection would see its own empty database)."""
    parsed = make_url(url)
    drivername = _ASYNC_DRIVERS.get(parsed.drivername, parsed.drivername)
    parsed = parsed.set(drivername=drivername)
    if parsed.get_backend_name() == "sqlite" and parsed.database in (None, "", ":memory:"):
        raise InvalidInputError("the SQLite store needs a file path (sqlite:///path/to/cronwheel.db)")
    if drivername not in ("sqlite+aiosqlite", "postgresql+asyncpg"):
        raise InvalidInputError(
            f"unsupported store URL scheme {parsed.drivername!r}: use sqlite or postgresql"
        )
    return parsed


def create_engine(url: str | URL, *, sqlite_begin_immediate: bool = True) -> AsyncEngine:
    """An async engine for ``url`` (see :func:`async_url`) with the per-connection setup above.
    ``sqlite_begin_immediate=False`` keeps SQLite's deferred BEGIN for writes too (measurement only).
    """
    parsed = async_url(url)
    if parsed.get_backend_name() != "sqlite":
        return create_async_engine(parsed, pool_pre_ping=True)
    engine = create_async_engine(parsed)
    _setup_sqlite(engine, immediate=sqlite_begin_immediate)
    return engine


def _setup_sqlite(engine: AsyncEngine, *, immediate: bool) -> None:
    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # no implicit BEGIN: the "begin" hook emits it
        cursor = dbapi_connection.cursor()
        try:
            for pragma in SQLITE_PRAGMAS:
                cursor.execute(pragma)
        finally:
            cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(connection: Connection) -> None:
        mode = connection.get_execution_options().get(_BEGIN_OPTION) if immediate else None
        connection.exec_driver_sql("BEGIN IMMEDIATE" if mode == "IMMEDIATE" else "BEGIN")


def is_sqlite(dialect: Dialect) -> bool:
    return dialect.name == "sqlite"


def is_postgresql(dialect: Dialect) -> bool:
    return dialect.name == "postgresql"


def upsert(dialect: Dialect, table: Table) -> sqlite.Insert | postgresql.Insert:
    """The dialect's own ``INSERT`` construct, which has ``on_conflict_do_update`` and
    ``excluded`` (SQLite >= 3.24 and PostgreSQL spell the upsert the same way)."""
    if dialect.name == "sqlite":
        return sqlite.insert(table)
    if dialect.name == "postgresql":
        return postgresql.insert(table)
    raise NotImplementedError(f"no upsert for {dialect.name}")


def insert_ignore(dialect: Dialect, table: Table) -> Insert:
    """``INSERT ... ON CONFLICT DO NOTHING`` for ``dialect`` (any unique key)."""
    if dialect.name == "sqlite":
        return sqlite.insert(table).on_conflict_do_nothing()
    if dialect.name == "postgresql":
        return postgresql.insert(table).on_conflict_do_nothing()
    raise NotImplementedError(f"no insert-or-ignore for {dialect.name}")


# -- errors --------------------------------------------------------------------------------------


_RETRYABLE_SQLSTATES = {"40001", "40P01"}  # PostgreSQL serialization failure, deadlock detected


def _is_foreign_key_violation(error: exc.IntegrityError) -> bool:
    orig = error.orig
    return getattr(orig, "sqlstate", None) == "23503" or "FOREIGN KEY constraint failed" in str(orig)


def _translate(error: exc.DBAPIError) -> Exception:
    if isinstance(error, exc.IntegrityError):
        if _is_foreign_key_violation(error):
            return NotFoundError(f"a referenced record does not exist: {error.orig}")
        return ConflictError(f"conflicts with a stored record: {error.orig}")
    if getattr(error.orig, "sqlstate", None) in _RETRYABLE_SQLSTATES:
        return TransientError(f"the write lost a race in the database; retry: {error.orig}")
    if isinstance(error, (exc.OperationalError, exc.InterfaceError)) or error.connection_invalidated:
        return BackendUnavailableError(f"the metadata store is unavailable: {error}")
    return error


@contextmanager
def translated_errors() -> Iterator[None]:
    """Re-raise driver errors as cronwheel errors: unique violations -> ConflictError, foreign
    key violations -> NotFoundError, serialization failures and deadlocks -> TransientError,
    connection and operational failures (including "database is locked") ->
    BackendUnavailableError, values the column types refuse -> InvalidInputError."""
    try:
        yield
    except CronwheelError:
        raise
    except exc.DBAPIError as error:
        translated = _translate(error)
        if translated is error:
            raise
        raise translated from error
    except (exc.DisconnectionError, exc.TimeoutError) as error:  # pool-level failures
        raise BackendUnavailableError(f"the metadata store is unavailable: {error}") from error
    except exc.StatementError as error:
        if isinstance(error.orig, (ValueError, TypeError)):
            raise InvalidInputError(str(error.orig)) from error
        raise
    except OSError as error:  # a driver that fails to connect before SQLAlchemy can wrap it
        raise BackendUnavailableError(f"the metadata store is unreachable: {error}") from error

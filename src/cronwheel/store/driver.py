"""Everything that differs between databases and their drivers, in one place: URLs, engine and
connection setup, how write transactions begin, what the store does differently on each database
(:class:`Flavor`), upsert, and the translation of driver errors into cronwheel's errors.

SQLite (aiosqlite): each statement takes one trip to the driver's thread
(:mod:`cronwheel.store.sqlite_cursor`); every connection gets WAL, ``synchronous=NORMAL``,
``foreign_keys=ON``, ``busy_timeout=5000`` and a 32 MiB page cache. The driver's own implicit
BEGIN is switched off and SQLAlchemy's ``begin`` event emits ``BEGIN`` itself, ``BEGIN IMMEDIATE``
for write transactions (connections given the :data:`WRITE` execution options): a write
transaction then takes SQLite's write lock up front and waits for it under ``busy_timeout``,
instead of failing with "database is locked" when a deferred transaction that has read tries to
upgrade to a writer while another connection writes.

PostgreSQL (asyncpg): plain transactions; conditional writes are safe under READ COMMITTED
because a blocked UPDATE re-checks its WHERE clause against the row it finally locks.

Every wait for PostgreSQL is bounded (:class:`PostgresTimeouts`), so a link that silently drops
packets (no RST: the kernel never reports the connection dead) surfaces as an error instead of a
hang: connecting (asyncpg ``timeout``, default 10 s), each statement, the pool's pre-ping and
COMMIT/ROLLBACK included (asyncpg ``command_timeout``, default 30 s: a ``fire`` of 2,000 runs
measured 1.7 s in all on a loaded 2-core VM, its slowest statement 0.2 s), and waiting for a free
pooled connection (SQLAlchemy ``pool_timeout``, default 30 s). Schema changes (DDL statements, which
only migrations issue) get ``migration_timeout`` instead (default 600 s): an index build or a table
rewrite of a large ``runs`` table, or a wait for its ACCESS EXCLUSIVE lock, legitimately takes
minutes, and a migration that times out is rolled back and retried by every start, so a bound
below its real duration would block the upgrade for good. (Waiting for the migration lock that
another node holds is an ordinary statement: it times out and the start is retried with backoff.
The job-change listener, :mod:`cronwheel.store.change_listener`, has its own bounds.) Each can be set in
the store URL's query, in seconds: ``postgresql://host/db?connect_timeout=5&command_timeout=60&
pool_timeout=10&migration_timeout=3600`` (cronwheel reads and removes them; asyncpg never sees
them). So are libpq's TLS parameters (``sslmode``, ``sslrootcert``, ``sslcert``, ``sslkey``,
``sslpassword``), which become asyncpg's ``ssl`` argument (:mod:`cronwheel.store.pg_connect`).

A timeout surfaces as :class:`~cronwheel.errors.BackendUnavailableError` (a ``TransientError``)
from :func:`translated_errors`. The connection that timed out is invalidated (a ``TimeoutError``
counts as a disconnect: the ``handle_error`` hook says so, and a failed pre-ping always
invalidates), and the ``invalidate`` hook terminates it at once instead of saying goodbye over a
link that does not answer; it never goes back to the pool, so once the link heals the next
operation gets a fresh connection.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, fields
from typing import Any

import asyncpg
from sqlalchemy import Table, event, exc
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import URL, Connection, Dialect, ExecutionContext, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import ConnectionPoolEntry

from cronwheel.errors import (
    BackendUnavailableError,
    ConflictError,
    CronwheelError,
    InvalidInputError,
    NotFoundError,
    PermanentError,
    RaceLostError,
)
from cronwheel.store import sqlite_cursor
from cronwheel.store.files import private_sqlite_files
from cronwheel.store.pg_connect import SSL_PARAMETERS, connect_arguments
from cronwheel.tls import tls_refused

SQLITE_PRAGMAS = (
    "PRAGMA busy_timeout=5000",  # first: the others may have to wait for a lock
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=NORMAL",
    "PRAGMA foreign_keys=ON",
    # A page cache of 32 MiB (default 2 MiB): a fire batch moves 2,000 cursors spread over the
    # jobs table, and with the default cache SQLite spilled and re-read pages mid-transaction
    # (``sqlite3PcacheFetchStress`` in a py-spy profile). bench_fire_phases.py embedded, 20k herd,
    # six A/B pairs: the cursor update 20-30 -> 15-18 us of CPU per fire, the fire 78-109 -> 69-86.
    # It grows only as pages are used.
    "PRAGMA cache_size=-32768",
)

_BEGIN_OPTION = "cronwheel_begin"
WRITE: dict[str, Any] = {_BEGIN_OPTION: "IMMEDIATE"}  # execution options of a write transaction

_ASYNC_DRIVERS = {
    "sqlite": "sqlite+aiosqlite",
    "postgresql": "postgresql+asyncpg",
    "postgres": "postgresql+asyncpg",
}


@dataclass(frozen=True, slots=True)
class PostgresTimeouts:
    """Client-side bounds, in seconds, on every wait for PostgreSQL (see the module docstring).
    Each field is set by the URL query parameter of the same name without ``_s``."""

    connect_timeout_s: float = 10.0  # TCP connect, TLS, authentication: the whole asyncpg connect
    command_timeout_s: float = 30.0  # one statement (pre-ping, BEGIN, COMMIT included)
    pool_timeout_s: float = 30.0  # waiting for a free pooled connection
    migration_timeout_s: float = 600.0  # one DDL statement (migrations)

    @classmethod
    def parameters(cls) -> tuple[str, ...]:
        """The URL query parameters that set the fields."""
        return tuple(field.name.removesuffix("_s") for field in fields(cls))

    @classmethod
    def from_query(cls, query: Mapping[str, str | tuple[str, ...]]) -> PostgresTimeouts:
        """The timeouts a URL's query sets, the defaults for the rest; a value that is not one
        positive number of seconds is refused."""
        values: dict[str, float] = {}
        for name in cls.parameters():
            if name in query:
                values[f"{name}_s"] = _seconds(name, query[name])
        return cls(**values)


def _seconds(name: str, value: str | tuple[str, ...]) -> float:
    text = value if isinstance(value, str) else ",".join(value)
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise InvalidInputError(
            f"store URL parameter {name} must be a positive number of seconds, not {text!r}"
        )
    return seconds


def async_url(url: str | URL) -> URL:
    """The URL with its async driver: ``sqlite:///x.db`` -> ``sqlite+aiosqlite:///x.db``,
    ``postgresql://...`` -> ``postgresql+asyncpg://...``, without cronwheel's own query
    parameters (:class:`PostgresTimeouts`, checked here). In-memory SQLite is refused (every
    pooled connection would see its own empty database), and so are timeouts on SQLite (they are
    PostgreSQL's)."""
    parsed = make_url(url)
    drivername = _ASYNC_DRIVERS.get(parsed.drivername, parsed.drivername)
    parsed = parsed.set(drivername=drivername)
    if parsed.get_backend_name() == "sqlite" and parsed.database in (None, "", ":memory:"):
        raise InvalidInputError("the SQLite store needs a file path (sqlite:///path/to/cronwheel.db)")
    if drivername not in ("sqlite+aiosqlite", "postgresql+asyncpg"):
        raise InvalidInputError(
            f"unsupported store URL scheme {parsed.drivername!r}: use sqlite or postgresql"
        )
    ours = [name for name in PostgresTimeouts.parameters() if name in parsed.query]
    tls = [name for name in SSL_PARAMETERS if name in parsed.query]
    if (ours or tls) and drivername == "sqlite+aiosqlite":
        kind = "timeouts" if ours else "TLS parameters"
        raise InvalidInputError(f"{', '.join(ours or tls)}: {kind} of PostgreSQL stores, not of SQLite")
    PostgresTimeouts.from_query(parsed.query)  # refuse bad values wherever the URL is used
    return parsed.difference_update_query([*ours, *tls])


def create_engine(
    url: str | URL, *, sqlite_begin_immediate: bool = True, pool_size: int = 10, max_overflow: int = 5
) -> AsyncEngine:
    """An async engine for ``url`` (see :func:`async_url`) with the per-connection setup above.
    ``sqlite_begin_immediate=False`` keeps SQLite's deferred BEGIN for writes too (measurement only).
    ``pool_size`` and ``max_overflow`` bound a PostgreSQL engine's pool (the connections kept open,
    and how many more it may open at once).
    """
    parsed = async_url(url)
    if parsed.get_backend_name() != "sqlite":
        query = make_url(url).query
        timeouts = PostgresTimeouts.from_query(query)
        return _postgresql_engine(parsed, timeouts, connect_arguments(query), (pool_size, max_overflow))
    if parsed.database:
        private_sqlite_files(parsed.database)  # 0600, before SQLite creates it with the umask's mode
    sqlite_cursor.install()  # one trip to aiosqlite's thread per statement
    engine = create_async_engine(parsed, hide_parameters=True)  # errors never quote a row's values
    _setup_sqlite(engine, immediate=sqlite_begin_immediate)
    return engine


def _postgresql_engine(
    url: URL, timeouts: PostgresTimeouts, tls: dict[str, Any], pool: tuple[int, int]
) -> AsyncEngine:
    engine = create_async_engine(
        url,
        hide_parameters=True,  # errors (and so logs, tracebacks included) never quote a row's values
        # No pre-ping: it costs three round trips per checkout (BEGIN, SELECT 1, ROLLBACK). A
        # connection that died (server restart) fails its first statement instead; SQLAlchemy then
        # invalidates the whole pool and the caller's retry (next tick, next sweep) reconnects.
        pool_pre_ping=False,
        # by default at most 15 connections, as SQLAlchemy's default, but 10 of them kept open: a
        # worker's bursts (every job of a second at once) otherwise open and close 10 at a time
        pool_size=pool[0],
        max_overflow=pool[1],
        pool_timeout=timeouts.pool_timeout_s,
        connect_args={
            "timeout": timeouts.connect_timeout_s,
            "command_timeout": timeouts.command_timeout_s,
            **tls,  # sslmode and its files (cronwheel.store.pg_connect)
        },
    )

    @event.listens_for(engine.sync_engine, "before_cursor_execute")
    def _before(
        connection: Connection, _cursor: Any, _sql: str, _params: Any, context: Any, _many: bool
    ) -> None:
        if _is_ddl(context):
            _set_command_timeout(connection, timeouts.migration_timeout_s)

    @event.listens_for(engine.sync_engine, "after_cursor_execute")
    def _after(
        connection: Connection, _cursor: Any, _sql: str, _params: Any, context: Any, _many: bool
    ) -> None:
        if _is_ddl(context):
            _set_command_timeout(connection, timeouts.command_timeout_s)

    @event.listens_for(engine.sync_engine, "handle_error")
    def _on_error(context: Any) -> None:
        if isinstance(context.original_exception, TimeoutError):
            context.is_disconnect = True  # never pool it again (SQLAlchemy 2.1 does so itself)
        connection = context.connection
        if connection is not None and _is_ddl(context.execution_context) and not connection.invalidated:
            _set_command_timeout(connection, timeouts.command_timeout_s)

    @event.listens_for(engine.sync_engine.pool, "invalidate")
    def _on_invalidate(
        dbapi_connection: Any, _record: ConnectionPoolEntry, error: BaseException | None
    ) -> None:
        if isinstance(error, TimeoutError):  # the link may be dead: no graceful goodbye over it
            dbapi_connection.driver_connection.terminate()

    return engine


def _is_ddl(context: ExecutionContext | None) -> bool:
    return context is not None and bool(getattr(context, "isddl", False))


def _set_command_timeout(connection: Connection, seconds: float) -> None:
    """Set the default timeout of the asyncpg connection under ``connection``. asyncpg has no
    public setter (only ``command_timeout`` at connect and a per-call ``timeout``, which
    SQLAlchemy does not pass), so this replaces its private configuration tuple; if a future
    asyncpg has none, DDL simply keeps the command timeout."""
    driver: Any = connection.connection.driver_connection
    config = getattr(driver, "_config", None)
    if config is not None and hasattr(config, "_replace"):
        driver._config = config._replace(command_timeout=seconds)


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


# -- what the store does differently on each database ----------------------------------------------


@dataclass(frozen=True, slots=True)
class Flavor:
    """The differences between the databases that the store's own code has to know, each named
    by its reason. The modules of :mod:`cronwheel.store.sql` branch on these fields, never on a
    database's name; :func:`flavor_of` is the one place that says which database does what
    (the SQL texts that differ are in :mod:`cronwheel.store.sql.where` and
    :mod:`cronwheel.store.sql.bulk`, chosen by ``arrays``)."""

    name: str
    # SQLite allows one writer at a time: the store queues its process' write transactions on an
    # asyncio.Lock (FIFO on the event loop) instead of leaving them to SQLite's busy handler,
    # which sleeps and polls.
    one_writer: bool
    # PostgreSQL runs reads, and writes whose statements need no common transaction, in
    # autocommit: under READ COMMITTED each statement takes its own snapshot anyway, so a
    # transaction around them only costs BEGIN and COMMIT round trips. SQLite keeps the
    # transaction: there it is one snapshot, and free.
    autocommit: bool
    # PostgreSQL binds a batch as one array per column (``unnest``, ``= ANY``): one statement
    # whatever its size, the same text every time, joined by primary key whatever the planner's
    # statistics say. SQLite takes IN lists and multi-row VALUES, in chunks under its limit of
    # bound variables.
    arrays: bool
    # PostgreSQL's LISTEN/NOTIFY carries "job changed" to the other processes of a cluster
    # (embedded mode has the in-process ChangeFeed).
    notifies: bool
    # PostgreSQL's clock (``clock_timestamp()``) is the one reference of every node of a cluster;
    # SQLite lives in this process, whose clock is the reference.
    remote_clock: bool
    # PostgreSQL runs write transactions side by side under READ COMMITTED: two creates that count
    # a team's live jobs would each miss the other's new one and both take the last place of a
    # quota. The count is taken under a transaction-scoped advisory lock on the team
    # (``pg_advisory_xact_lock``). SQLite writes one transaction at a time (BEGIN IMMEDIATE).
    team_locks: bool
    # PostgreSQL joins LATERAL: each listed job's newest runs are one index range of (job_id,
    # slot), read backwards and stopped at the limit, in one statement for a page of jobs. SQLite
    # has no LATERAL: the same ranges as a correlated ``id IN (newest ids of this job)``.
    lateral: bool
    # PostgreSQL runs INSERT and UPDATE inside WITH (data-modifying CTEs) and returns columns of
    # a joined table from UPDATE ... FROM: a worker's claim (the runs, their attempts and events)
    # is one statement. SQLite has neither: the claim reads the states, then writes.
    writes_in_with: bool
    # SQLite runs in this process, on aiosqlite's thread: a worker's claim or outcome batch runs
    # there whole, as one function of several statements (:mod:`cronwheel.store.sql.lite`), not
    # statement by statement from the event loop.
    in_process: bool


SQLITE = Flavor(
    "sqlite",
    one_writer=True,
    autocommit=False,
    arrays=False,
    notifies=False,
    remote_clock=False,
    team_locks=False,
    lateral=False,
    writes_in_with=False,
    in_process=True,
)
POSTGRESQL = Flavor(
    "postgresql",
    one_writer=False,
    autocommit=True,
    arrays=True,
    notifies=True,
    remote_clock=True,
    team_locks=True,
    lateral=True,
    writes_in_with=True,
    in_process=False,
)
_FLAVORS = {flavor.name: flavor for flavor in (SQLITE, POSTGRESQL)}


def flavor_of(dialect: Dialect) -> Flavor:
    """The :class:`Flavor` of ``dialect``'s database (SQLite or PostgreSQL)."""
    found = _FLAVORS.get(dialect.name)
    if found is None:
        raise NotImplementedError(f"no store for {dialect.name}")
    return found


def upsert(dialect: Dialect, table: Table) -> sqlite.Insert | postgresql.Insert:
    """The dialect's own ``INSERT`` construct, which has ``on_conflict_do_update`` and
    ``excluded`` (SQLite >= 3.24 and PostgreSQL spell the upsert the same way)."""
    if dialect.name == "sqlite":
        return sqlite.insert(table)
    if dialect.name == "postgresql":
        return postgresql.insert(table)
    raise NotImplementedError(f"no upsert for {dialect.name}")


# -- errors --------------------------------------------------------------------------------------


_RETRYABLE_SQLSTATES = {"40001", "40P01"}  # PostgreSQL serialization failure, deadlock detected
# The server cannot serve now, whatever the statement: connection exceptions (class 08), shutting
# down or starting up (57P01-57P03: admin/crash shutdown, "not yet accepting connections" while it
# recovers), too many connections, out of resources (53xxx). Found by crashing PostgreSQL under
# the chaos suite: a connect during recovery failed with 57P03 as a generic DBAPIError.
# 55000 is what a database answers while an operator keeps it from accepting connections
# (ALLOW_CONNECTIONS false): maintenance, waited out like a restart.
_UNAVAILABLE_SQLSTATES = {"57P01", "57P02", "57P03", "55000"}
_UNAVAILABLE_SQLSTATE_CLASSES = ("08", "53")
# The server answered and refused this URL: unknown role, wrong password, no pg_hba.conf entry
# (class 28), no such database (3D000). Waiting will not help; the process stops and says so.
_REFUSED_SQLSTATES = {"3D000"}
_REFUSED_SQLSTATE_CLASSES = ("28",)


class StoreRefusedError(PermanentError):
    """The database refused the store URL's credentials or database name."""


def _refused(sqlstate: str | None) -> bool:
    return sqlstate is not None and (
        sqlstate in _REFUSED_SQLSTATES or sqlstate.startswith(_REFUSED_SQLSTATE_CLASSES)
    )


def _refusal(cause: BaseException) -> StoreRefusedError:
    return StoreRefusedError(
        f"the metadata store refused the connection: {describe(cause)} "
        "(check CRONWHEEL_DATABASE_URL / --database-url)"
    )


def _is_foreign_key_violation(error: exc.IntegrityError) -> bool:
    orig = error.orig
    return getattr(orig, "sqlstate", None) == "23503" or "FOREIGN KEY constraint failed" in str(orig)


def describe(error: BaseException) -> str:
    """A database error as logs, problems and other errors may show it: the driver's error class
    and the first line of its message, never the SQL nor its parameters (SQLAlchemy's text holds
    both, and PostgreSQL's DETAIL line quotes a row's values)."""
    orig = error.orig if isinstance(error, exc.DBAPIError) and error.orig is not None else error
    message = str(orig).strip().split("\n", 1)[0].split(" [SQL:", 1)[0].strip()
    name = type(orig).__name__
    return f"{name}: {message}" if message else name


# Values the server refuses in a column, whatever the statement: a character the encoding cannot
# hold (U+0000 in text, 22021; "\u0000" in jsonb, 22P05), a number out of the column's range
# (22003), a string longer than its column (22001). The statement cannot succeed with that value,
# so the fault is the input's, not the server's: refused as invalid input, without the driver's
# text (it may quote the value). The API refuses such text before it reaches a store
# (cronwheel.api.schemas.storable); this is the backstop for any other way in.
_REFUSED_VALUE_SQLSTATES = {"22021", "22P05", "22003", "22001"}
REFUSED_VALUE = "a value is not one the metadata store can hold; nothing was written"


def _translate(error: exc.DBAPIError) -> Exception:
    if isinstance(error, exc.IntegrityError):
        if _is_foreign_key_violation(error):
            return NotFoundError(f"a referenced record does not exist: {describe(error)}")
        return ConflictError(f"conflicts with a stored record: {describe(error)}")
    if _refused(getattr(error.orig, "sqlstate", None)) or tls_refused(error.orig):
        return _refusal(error.orig or error)
    if getattr(error.orig, "sqlstate", None) in _RETRYABLE_SQLSTATES:
        return RaceLostError(f"the write lost a race in the database; retry: {describe(error)}")
    if (
        isinstance(error, (exc.OperationalError, exc.InterfaceError))
        or error.connection_invalidated
        or _server_unavailable(getattr(error.orig, "sqlstate", None))
        or _lost_connection(error)
    ):
        return BackendUnavailableError(f"the metadata store is unavailable: {describe(error)}")
    return error


def _refused_value(error: exc.DBAPIError) -> bool:
    return getattr(error.orig, "sqlstate", None) in _REFUSED_VALUE_SQLSTATES or _unencodable(error)


def _unencodable(error: BaseException) -> bool:
    """Whether a text without UTF-8 bytes (a lone surrogate) lies under ``error``: asyncpg
    reports it as "invalid input for query argument", caused by a UnicodeEncodeError."""
    cause: BaseException | None = error
    for _ in range(10):
        if cause is None:
            return False
        if isinstance(cause, UnicodeError) or isinstance(getattr(cause, "orig", None), UnicodeError):
            return True
        cause = cause.__cause__ or cause.__context__
    return False


def _forget_row_values(error: exc.DBAPIError) -> None:
    """Cut the driver's own exception off the chain under SQLAlchemy's wrapper of it (once it is
    translated): asyncpg's text ends with PostgreSQL's DETAIL line, which quotes the row (a job's
    target, its headers included), and a logged traceback prints the whole chain. The wrapper
    keeps the class and the first line (:func:`describe`); the engines hide SQL parameters."""
    orig = error.orig
    if isinstance(orig, BaseException):
        orig.__cause__ = orig.__context__ = None
        orig.__suppress_context__ = True


def _lost_connection(error: BaseException) -> bool:
    """Whether a socket error, or asyncpg's "connection was closed in the middle of operation",
    lies under ``error`` (SQLAlchemy wraps the latter as a generic DBAPIError). Found by the chaos
    suite: a PostgreSQL restart reset a scheduler's connection mid-query and stopped the process."""
    cause = error.__cause__ or error.__context__
    for _ in range(10):
        if cause is None:
            return False
        if isinstance(cause, (OSError, asyncpg.exceptions.ConnectionDoesNotExistError)):
            return True
        cause = cause.__cause__ or cause.__context__
    return False


def _server_unavailable(sqlstate: str | None) -> bool:
    return sqlstate is not None and (
        sqlstate in _UNAVAILABLE_SQLSTATES or sqlstate.startswith(_UNAVAILABLE_SQLSTATE_CLASSES)
    )


def connect_error(error: Exception, what: str) -> Exception:
    """The cronwheel error for a failure of a direct asyncpg connect (outside SQLAlchemy: the
    job-change listener's connection): refused credentials or database -> StoreRefusedError;
    any other answer of the server, a network failure or a timeout while connecting ->
    BackendUnavailableError (the server is down, starting, full or kept from accepting
    connections); anything else (a bug) is returned as it is."""
    if isinstance(error, CronwheelError):
        return error
    if isinstance(error, asyncpg.PostgresError) and _refused(error.sqlstate):
        return _refusal(error)
    if isinstance(error, OSError) and tls_refused(error):
        return _refusal(error)
    if isinstance(error, (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError)):
        return BackendUnavailableError(f"{what}: {describe(error)}")
    return error


@contextmanager
def translated_errors() -> Iterator[None]:
    """Re-raise driver errors as cronwheel errors: unique violations -> ConflictError, foreign
    key violations -> NotFoundError, refused credentials or database -> StoreRefusedError (a
    PermanentError), serialization failures and deadlocks -> TransientError,
    connection and operational failures (including "database is locked") and timeouts ->
    BackendUnavailableError, values the column types refuse -> InvalidInputError."""
    try:
        yield
    except CronwheelError:
        raise
    except exc.DBAPIError as error:
        translated = InvalidInputError(REFUSED_VALUE) if _refused_value(error) else _translate(error)
        _forget_row_values(error)
        if translated is error:
            raise
        raise translated from error
    except (exc.DisconnectionError, exc.TimeoutError) as error:  # pool-level failures
        raise BackendUnavailableError(f"the metadata store is unavailable: {describe(error)}") from error
    except TimeoutError as error:  # the driver's connect or command timeout (PostgresTimeouts)
        raise BackendUnavailableError(
            "the metadata store did not answer in time (connect or command timeout)"
        ) from error
    except (exc.StatementError, UnicodeError) as error:
        if _unencodable(error):  # a lone surrogate: no UTF-8 bytes to send (sqlite3 raises it bare)
            raise InvalidInputError(REFUSED_VALUE) from error
        if not isinstance(error, exc.StatementError):
            raise
        if isinstance(error.orig, (ValueError, TypeError)):
            raise InvalidInputError(str(error.orig)) from error
        raise
    except OSError as error:  # a driver that fails to connect before SQLAlchemy can wrap it
        if tls_refused(error):
            raise _refusal(error) from error
        raise BackendUnavailableError(f"the metadata store is unreachable: {describe(error)}") from error

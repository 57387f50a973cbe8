"""Driver errors that mean "the server cannot serve now" are retryable, whatever their class."""

from __future__ import annotations

import traceback

import asyncpg
import pytest
from sqlalchemy import exc, text

import suite_stores
from cronwheel.errors import InvalidInputError, TransientError
from cronwheel.store import JobQuery
from cronwheel.store.driver import describe, translated_errors
from cronwheel.store.sql import SqlStore
from suite_backends import POSTGRES_URL

from .support import START, new_job


class PgError(Exception):
    def __init__(self, sqlstate: str) -> None:
        super().__init__(f"server said {sqlstate}")
        self.sqlstate = sqlstate


@pytest.mark.parametrize(
    "sqlstate",
    [
        "57P03",  # cannot_connect_now: the server is recovering after a crash (seen under chaos)
        "57P01",  # admin_shutdown
        "57P02",  # crash_shutdown
        "08006",  # connection_failure
        "08001",  # sqlclient_unable_to_establish_sqlconnection
        "53300",  # too_many_connections
    ],
)
def test_an_unavailable_server_is_a_transient_error(sqlstate: str) -> None:
    with pytest.raises(TransientError, match="unavailable"), translated_errors():
        raise exc.DBAPIError("SELECT 1", None, PgError(sqlstate))


def test_other_database_errors_are_not_retried() -> None:
    with pytest.raises(exc.DBAPIError), translated_errors():
        raise exc.DBAPIError("SELECT nope", None, PgError("42P01"))  # undefined_table: a bug, not an outage


def test_a_connection_lost_mid_statement_is_a_transient_error() -> None:
    """asyncpg's ConnectionDoesNotExistError (over a reset socket) reaches us as a generic
    DBAPIError with no SQLSTATE: seen when the chaos suite crashed PostgreSQL under a scheduler."""
    reset = ConnectionResetError(104, "Connection reset by peer")
    try:
        try:
            raise reset
        except ConnectionResetError as error:
            raise asyncpg.exceptions.ConnectionDoesNotExistError(
                "connection was closed in the middle of operation"
            ) from error
    except asyncpg.exceptions.ConnectionDoesNotExistError as lost:
        wrapped = exc.DBAPIError("SELECT 1", None, Exception(str(lost)))
        wrapped.__cause__ = lost
    with pytest.raises(TransientError, match="unavailable"), translated_errors():
        raise wrapped


async def test_connections_the_server_dropped_cost_one_failed_call_at_most(postgres_store: SqlStore) -> None:
    """There is no pre-ping (three round trips per checkout): after the server drops every
    connection (a restart), the first statement on a dead one fails as retryable, SQLAlchemy
    invalidates the whole pool, and the next call reconnects."""
    job = await new_job(postgres_store)
    held = [postgres_store.engine.connect() for _ in range(3)]  # several pooled connections
    for connection in held:
        await connection.start()
    for connection in held:
        await connection.close()
    database = postgres_store.engine.url.database
    assert POSTGRES_URL is not None
    await suite_stores.admin(
        POSTGRES_URL,
        f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{database}'",
    )
    failures = 0
    for _ in range(4):
        try:
            assert (await postgres_store.get_job(job.id)).id == job.id
        except TransientError:
            failures += 1
    assert failures <= 1, f"{failures} calls failed"
    await postgres_store.mark_queued(["no-such-run"], START)  # writes too


# -- what an error may say ---------------------------------------------------------------------------


async def _failing_statement(store: SqlStore, statement: str) -> BaseException:
    """The error of ``statement`` (bound to a secret) as the store's code sees it."""
    try:
        async with store.engine.connect() as connection, connection.begin():
            with translated_errors():
                await connection.execute(text(statement), {"v": SECRET})
    except Exception as error:
        return error
    raise AssertionError("the statement did not fail")


SECRET = "tok-3f9a-secret"


async def test_errors_never_quote_sql_parameters(store: SqlStore) -> None:
    """The "backend unavailable" log line carried SQLAlchemy's text: the SQL and its parameters.
    Now errors say the driver's class and message; tracebacks hide the parameters too."""
    for statement in ("SELECT * FROM no_such_table WHERE a = :v", "INSERT INTO jobs (id) VALUES (:v)"):
        error = await _failing_statement(store, statement)
        shown = "".join(traceback.format_exception(error))
        assert SECRET not in shown, shown
        assert SECRET not in str(error)


async def test_unavailable_says_the_drivers_class_and_message(store: SqlStore, backend: str) -> None:
    if backend == "sqlite":
        error = await _failing_statement(store, "SELECT * FROM no_such_table WHERE a = :v")
        assert (
            str(error) == "the metadata store is unavailable: OperationalError: no such table: no_such_table"
        )
    await new_job(store)
    duplicate = await _failing_statement(store, "INSERT INTO jobs SELECT * FROM jobs WHERE :v = :v")
    assert str(duplicate).startswith("conflicts with a stored record: ")
    assert "SQL" not in str(duplicate)
    assert "DETAIL" not in str(duplicate)  # PostgreSQL's quotes the row's key


def test_describe_keeps_the_first_line_only() -> None:
    error = exc.DBAPIError("SELECT :v", {"v": SECRET}, PgError("08006"))
    assert describe(error) == "PgError: server said 08006"
    assert (
        describe(OSError(111, "Connection refused"))
        == "ConnectionRefusedError: [Errno 111] Connection refused"
    )


@pytest.mark.parametrize("text_", ["a\x00b", "a\ud800b"])
async def test_a_value_the_store_cannot_hold_is_invalid_input(
    store: SqlStore, backend: str, text_: str
) -> None:
    """Behind the API's own check (cronwheel.api.schemas.storable): NUL (PostgreSQL's text refuses it) or a
    lone surrogate (no UTF-8 bytes) reaching a store is the input's fault, refused as invalid
    input that quotes nothing, and nothing is written; never a server fault."""
    if backend == "sqlite" and "\x00" in text_:  # SQLite holds NUL: the API refuses it before any store
        assert (await store.get_job((await new_job(store, description=text_)).id)).description == text_
        return
    with pytest.raises(InvalidInputError, match="not one the metadata store can hold") as refused:
        await new_job(store, description=text_)
    assert "a\x00b" not in "".join(traceback.format_exception(refused.value))
    assert (await store.list_jobs(JobQuery())).items == []

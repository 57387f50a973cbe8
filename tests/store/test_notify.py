"""Job-change notifications across processes (PostgreSQL LISTEN/NOTIFY), on the live server:
the store notifies in the writing transaction, a listener on another connection hears it, and a
listener that lost its connection reconnects and says "reload everything"."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from cronwheel.errors import BackendUnavailableError, ConflictError, InvalidInputError
from cronwheel.model import Calendar, CalendarSpec, RunState
from cronwheel.store.change_listener import CHANNEL, RELOAD_ALL, PostgresChangeListener, listener_dsn
from cronwheel.store.driver import StoreRefusedError, async_url
from cronwheel.store.sql import SqlStore, open_store
from suite_backends import POSTGRES_URL

from .support import START, at, make_job, make_run, new_job

WITHIN = 1.0  # seconds a notification may take


async def _next(queue: asyncio.Queue[str], timeout: float = WITHIN) -> str:
    return await asyncio.wait_for(queue.get(), timeout)


async def _admin(sql: str) -> None:
    assert POSTGRES_URL is not None
    engine = create_async_engine(async_url(POSTGRES_URL), isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as connection:
            await connection.execute(text(sql))
    finally:
        await engine.dispose()


async def test_job_writes_reach_a_listener_on_another_connection(
    postgres_store: SqlStore, postgres_url: str
) -> None:
    writer = await open_store(postgres_url)  # another store (process), another pool
    try:
        async with PostgresChangeListener(postgres_url) as listener:
            changes, also = listener.subscribe(), listener.subscribe()
            job = await writer.create_job(make_job())
            assert await _next(changes) == job.id
            assert await _next(also) == job.id  # every subscriber hears it

            edited = await postgres_store.update_job(replace(job, description="edited"), job.version)
            assert await _next(changes) == job.id

            skipped = make_run(edited, at(-1), RunState.SKIPPED, reason="paused")
            assert await postgres_store.record_skipped([skipped], START) != []
            assert await _next(changes) == job.id
            assert await postgres_store.record_skipped([skipped], START) == []  # nothing written,

            await writer.delete_job(job.id, START)
            assert await _next(changes) == job.id  # ... nothing said
            assert changes.empty()
    finally:
        await writer.close()


async def test_a_calendar_edit_announces_the_jobs_listing_it(
    postgres_store: SqlStore, postgres_url: str
) -> None:
    """Every node's scheduler reloads the jobs a calendar edit rewrote: the edit notifies them in
    its transaction, as a job edit does."""
    closed = Calendar("ops", "closures", CalendarSpec(weekdays=(7,)))
    await postgres_store.create_calendar(closed)
    listing = await postgres_store.create_job(make_job("a", calendars=("closures",)))
    other = await postgres_store.create_job(make_job("b"))
    async with PostgresChangeListener(postgres_url) as listener:
        changes = listener.subscribe()
        await postgres_store.update_calendar(replace(closed, spec=CalendarSpec(weekdays=(6, 7))))
        assert await _next(changes) == listing.id
        await postgres_store.update_job(replace(other, description="edited"), other.version)
        assert await _next(changes) == other.id  # the job that does not list it was not announced


async def test_a_change_that_rolls_back_is_not_announced(postgres_store: SqlStore, postgres_url: str) -> None:
    async with PostgresChangeListener(postgres_url) as listener:
        changes = listener.subscribe()
        taken = await new_job(postgres_store, "taken")
        assert await _next(changes) == taken.id
        with pytest.raises(ConflictError):
            await new_job(postgres_store, "taken")  # the same name: refused, rolled back
        marker = await new_job(postgres_store, "marker")
        assert await _next(changes) == marker.id
        fired = await postgres_store.fire([], START)  # firing is not a job change
        assert fired.accepted == []
        assert changes.empty()


async def test_a_lost_connection_is_reestablished_and_says_reload_everything(
    postgres_store: SqlStore, postgres_url: str
) -> None:
    async with PostgresChangeListener(postgres_url, min_backoff_s=0.05) as listener:
        changes = listener.subscribe()
        before = listener.server_pid
        assert before is not None
        await _admin(f"SELECT pg_terminate_backend({before})")
        assert await _next(changes, 5) == RELOAD_ALL  # changes meanwhile may have been missed
        assert listener.listening
        assert listener.reconnects == 1
        assert listener.server_pid not in (None, before)
        job = await new_job(postgres_store)
        assert await _next(changes) == job.id  # and it keeps delivering


async def test_it_retries_with_backoff_while_the_database_refuses(
    postgres_store: SqlStore, postgres_url: str
) -> None:
    database = make_url(postgres_url).database
    async with PostgresChangeListener(postgres_url, min_backoff_s=0.05, max_backoff_s=0.2) as listener:
        changes = listener.subscribe()
        await _admin(f'ALTER DATABASE "{database}" WITH ALLOW_CONNECTIONS false')
        try:
            await _admin(f"SELECT pg_terminate_backend({listener.server_pid})")
            await asyncio.sleep(0.6)  # several refused attempts
            assert not listener.listening
            assert changes.empty()
        finally:
            await _admin(f'ALTER DATABASE "{database}" WITH ALLOW_CONNECTIONS true')
        assert await _next(changes, 5) == RELOAD_ALL
        job = await new_job(postgres_store)
        assert await _next(changes) == job.id


async def test_health_checks_of_a_live_connection_change_nothing(
    postgres_store: SqlStore, postgres_url: str
) -> None:
    async with PostgresChangeListener(postgres_url, health_check_s=0.02) as listener:
        changes = listener.subscribe()
        pid = listener.server_pid
        await asyncio.sleep(0.2)  # several checks
        job = await new_job(postgres_store)
        assert await _next(changes) == job.id
        assert (listener.reconnects, listener.server_pid) == (0, pid)


async def test_start_fails_clearly_when_the_server_is_unreachable() -> None:
    listener = PostgresChangeListener("postgresql://nobody@127.0.0.1:1/nothing", timeout_s=2)
    with pytest.raises(BackendUnavailableError, match="cannot listen for job changes"):
        await listener.start()
    await listener.stop()


async def test_start_fails_at_once_when_the_server_refuses_the_url(postgres_url: str) -> None:
    missing = make_url(postgres_url).set(database="cw_no_such_database").render_as_string(hide_password=False)
    listener = PostgresChangeListener(missing, timeout_s=2)
    with pytest.raises(StoreRefusedError, match="does not exist"):
        await listener.start()
    await listener.stop()


async def test_a_refused_reconnect_ends_the_listener_and_is_raised_to_stop_the_process(
    postgres_url: str,
) -> None:
    """Its role may no longer log in: waiting will not help, so the error goes to the process
    (``supervise``, a task of the node) instead of a reconnect loop that never ends."""
    role = f"cw_listener_{uuid.uuid4().hex[:8]}"
    await _admin(f"CREATE ROLE {role} LOGIN")
    try:
        url = make_url(postgres_url).set(username=role).render_as_string(hide_password=False)
        listener = PostgresChangeListener(url, min_backoff_s=0.05)
        await listener.start()
        stop = asyncio.Event()
        supervising = asyncio.create_task(listener.supervise(stop))
        await _admin(f"ALTER ROLE {role} NOLOGIN")
        await _admin(f"SELECT pg_terminate_backend({listener.server_pid})")
        with pytest.raises(StoreRefusedError, match="not permitted to log in"):
            await asyncio.wait_for(supervising, 10)
        await listener.stop()
    finally:
        await _admin(f"DROP ROLE {role}")


async def test_supervise_returns_when_the_node_stops(postgres_url: str) -> None:
    async with PostgresChangeListener(postgres_url) as listener:
        stop = asyncio.Event()
        supervising = asyncio.create_task(listener.supervise(stop))
        await asyncio.sleep(0.05)
        assert not supervising.done()
        stop.set()
        await asyncio.wait_for(supervising, 1)


def test_listener_urls() -> None:
    assert listener_dsn("postgresql+asyncpg://u:p@h:5432/db") == "postgresql://u:p@h:5432/db"
    assert listener_dsn("postgres://h/db") == "postgresql://h/db"
    with pytest.raises(InvalidInputError):
        listener_dsn("sqlite:///x.db")
    assert CHANNEL == "cronwheel_jobs"

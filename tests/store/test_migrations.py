"""Migrations build exactly schema.py's tables; engine setup, URLs and error translation."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Column, Integer, MetaData, exc, insert, inspect, select, text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from cronwheel.errors import (
    BackendUnavailableError,
    ConflictError,
    InvalidInputError,
    NotFoundError,
    TransientError,
)
from cronwheel.model import Calendar, CalendarShift, CalendarSpec, Job, Run, RunKind
from cronwheel.store import codec
from cronwheel.store.driver import async_url, create_engine, translated_errors
from cronwheel.store.migrate import (
    alembic_config,
    current_revision,
    head_revision,
    run_sync_at,
    upgrade_database,
)
from cronwheel.store.port import StoredSecret
from cronwheel.store.schema import coordination_shards, dead_triggers, jobs, metadata, runs, triggers
from cronwheel.store.sql import SchemaOutdatedError, open_store

from .support import START, make_job, make_run

_CALENDAR_COLUMNS = ("calendars", "calendar_shift", "calendar_spec")


def _row_before_0009(job: Job) -> dict[str, Any]:
    """A job's row as schemas before 0009 hold it (no ``retention`` column)."""
    return {key: value for key, value in _job_row_before_0017(job).items() if key != "retention"}


def _job_row_before_0017(job: Job) -> dict[str, Any]:
    """A job's row as schemas before 0017 hold it (none of the columns 0017 and later add)."""
    return {key: value for key, value in _row_before_0018(job).items() if key != "jitter_s"}


def _run_row_before_0017(run: Run) -> dict[str, Any]:
    """A run's row as schemas before 0017 hold it (no ``due_at`` column)."""
    return {key: value for key, value in codec.run_to_row(run).items() if key != "due_at"}


def _row_before_0018(job: Job) -> dict[str, Any]:
    """A job's row as schemas before 0018 hold it (no calendar columns, nor 0019's)."""
    return {key: value for key, value in _row_before_0019(job).items() if key not in _CALENDAR_COLUMNS}


def _row_before_0019(job: Job) -> dict[str, Any]:
    """A job's row as schemas before 0019 hold it (no ``delete_after_success`` column)."""
    return {key: value for key, value in codec.job_to_row(job).items() if key != "delete_after_success"}


def _columns(connection: Connection, table: str) -> set[str]:
    return {column["name"] for column in inspect(connection).get_columns(table)}


def _diff(connection: Connection, target: MetaData) -> list[Any]:
    context = MigrationContext.configure(connection, opts={"compare_type": True})
    diff: list[Any] = compare_metadata(context, target)
    return diff


COORDINATION = {"coordination_members", "coordination_duties", "coordination_shards"}
RUN_FILTER_INDEXES = {"ix_runs_reasoned_slot_id", "ix_runs_late_slot_id"}  # 0023
LIVE_OUTPUT_COLUMNS = {"attempts.output_at", "attempts.response_headers"}  # 0024


def _metadata_without(names: set[str]) -> MetaData:
    """The schema's metadata without the tables, indexes and columns (``table.column``) ``names``
    (those of later revisions); the columns of revision 0024 are always left out."""
    names = names | LIVE_OUTPUT_COLUMNS
    kept = MetaData(naming_convention=metadata.naming_convention)
    for table in metadata.sorted_tables:
        if table.name not in names:
            copy = table.to_metadata(kept)
            copy.indexes = {index for index in copy.indexes if index.name not in names}
            for column in [c for c in copy.columns if f"{table.name}.{c.name}" in names]:
                copy._columns.remove(column)
    return kept


async def _diff_at(url: str, target: MetaData) -> list[Any]:
    engine = create_engine(url)
    try:
        async with engine.connect() as connection:
            return await connection.run_sync(_diff, target)
    finally:
        await engine.dispose()


async def test_migrated_schema_equals_the_metadata(empty_store_url: str) -> None:
    await upgrade_database(empty_store_url)
    assert await _diff_at(empty_store_url, metadata) == []


async def test_the_comparison_would_see_a_difference(empty_store_url: str) -> None:
    await upgrade_database(empty_store_url)
    changed = MetaData(naming_convention=metadata.naming_convention)
    for table in metadata.tables.values():
        table.to_metadata(changed)
    changed.tables["runs"].append_column(Column("extra", Integer, nullable=True))
    diff = await _diff_at(empty_store_url, changed)
    assert [(entry[0], entry[3].name) for entry in diff] == [("add_column", "extra")]


async def test_upgrade_is_idempotent_and_reaches_head(empty_store_url: str) -> None:
    await upgrade_database(empty_store_url)
    await upgrade_database(empty_store_url)
    engine = create_engine(empty_store_url)
    try:
        assert await current_revision(engine) == head_revision() == "0024"
    finally:
        await engine.dispose()


async def test_concurrent_first_upgrades_serialize(empty_store_url: str) -> None:
    await asyncio.gather(*(upgrade_database(empty_store_url) for _ in range(4)))
    assert await _diff_at(empty_store_url, metadata) == []


async def test_downgrade_then_upgrade(empty_store_url: str) -> None:
    await upgrade_database(empty_store_url)

    def downgrade(connection: Connection) -> None:
        config = alembic_config()
        config.attributes["connection"] = connection
        command.downgrade(config, "base")

    await run_sync_at(empty_store_url, downgrade)
    engine = create_engine(empty_store_url)
    try:
        assert await current_revision(engine) is None
    finally:
        await engine.dispose()
    await upgrade_database(empty_store_url)
    assert await _diff_at(empty_store_url, metadata) == []


def _to(revision: str, *, down: bool = False) -> Callable[[Connection], None]:
    def migrate(connection: Connection) -> None:
        config = alembic_config()
        config.attributes["connection"] = connection
        (command.downgrade if down else command.upgrade)(config, revision)

    return migrate


async def test_0002_adds_shard_epochs_to_a_0001_database_and_keeps_its_data(empty_store_url: str) -> None:
    await run_sync_at(empty_store_url, _to("0001"))
    job = make_job()
    engine = create_engine(empty_store_url)
    try:
        assert await current_revision(engine) == "0001"
        async with engine.begin() as connection:
            await connection.execute(insert(jobs).values(_row_before_0009(job)))
            tables = await connection.run_sync(lambda sync: inspect(sync).get_table_names())
            assert "shard_epochs" not in tables
    finally:
        await engine.dispose()

    store = await open_store(empty_store_url)  # what a new release does on start: migrate to head
    try:
        assert await current_revision(store.engine) == head_revision()
        assert (await store.get_job(job.id)).name == job.name
        assert await store.claim_shards({job.shard: 1}, "a", START) == {job.shard}
    finally:
        await store.close()
    assert await _diff_at(empty_store_url, metadata) == []

    await run_sync_at(empty_store_url, _to("0001", down=True))
    engine = create_engine(empty_store_url)
    try:
        assert await current_revision(engine) == "0001"
        async with engine.connect() as connection:
            tables = await connection.run_sync(lambda sync: inspect(sync).get_table_names())
            assert "shard_epochs" not in tables
            assert await connection.scalar(select(jobs.c.name).where(jobs.c.id == job.id)) == job.name
    finally:
        await engine.dispose()


async def test_0016_adds_backfills_and_the_backfill_kind_to_a_0014_database(empty_store_url: str) -> None:
    await run_sync_at(empty_store_url, _to("0014"))
    engine = create_engine(empty_store_url)
    job = make_job()
    try:
        async with engine.begin() as connection:
            await connection.execute(insert(jobs).values(_job_row_before_0017(job)))
            older = make_run(job, START, created_at=START)
            await connection.execute(insert(runs).values(_run_row_before_0017(older)))
    finally:
        await engine.dispose()

    store = await open_store(empty_store_url)  # migrated to head
    try:
        backfilled = make_run(job, START - timedelta(minutes=1), kind=RunKind.BACKFILL, created_at=START)
        assert await store.get_run(older.id) == older
        async with store.engine.begin() as connection:
            await connection.execute(insert(runs).values(codec.run_to_row(backfilled)))
        assert (await store.get_run(backfilled.id)).kind is RunKind.BACKFILL
        with pytest.raises(exc.IntegrityError):  # the CHECK still refuses a kind that is none
            async with store.engine.begin() as connection:
                await connection.execute(
                    insert(runs).values({**codec.run_to_row(older), "id": "x", "kind": "other"})
                )
    finally:
        await store.close()
    assert await _diff_at(empty_store_url, metadata) == []

    await run_sync_at(empty_store_url, _to("0014", down=True))
    engine = create_engine(empty_store_url)
    try:
        async with engine.connect() as connection:
            tables = await connection.run_sync(lambda sync: inspect(sync).get_table_names())
            assert "backfills" not in tables
            assert set(await connection.scalars(select(runs.c.id))) == {older.id}
    finally:
        await engine.dispose()


async def test_0018_adds_calendars_to_a_0017_database_and_downgrades_without_them(
    empty_store_url: str,
) -> None:
    await run_sync_at(empty_store_url, _to("0017"))
    engine = create_engine(empty_store_url)
    job = make_job()
    try:
        async with engine.begin() as connection:
            await connection.execute(insert(jobs).values(_row_before_0018(job)))
    finally:
        await engine.dispose()

    store = await open_store(empty_store_url)  # migrated to head
    try:
        stored = await store.get_job(job.id)  # an existing job lists no calendar
        assert (stored.calendars, stored.calendar_shift, stored.calendar_spec) == (
            (),
            CalendarShift.NONE,
            None,
        )
        await store.create_calendar(Calendar(job.team, "closed", CalendarSpec(weekdays=(6, 7))))
        assert (await store.get_calendar(job.team, "closed")).spec.weekdays == (6, 7)
    finally:
        await store.close()
    assert await _diff_at(empty_store_url, metadata) == []

    await run_sync_at(empty_store_url, _to("0017", down=True))
    engine = create_engine(empty_store_url)
    try:
        async with engine.connect() as connection:
            assert "calendars" not in await connection.run_sync(lambda sync: inspect(sync).get_table_names())
            assert "calendar_spec" not in await connection.run_sync(lambda sync: _columns(sync, "jobs"))
            assert set(await connection.scalars(select(jobs.c.id))) == {job.id}
    finally:
        await engine.dispose()


async def test_0019_adds_delete_after_success_false_to_a_0018_database(empty_store_url: str) -> None:
    await run_sync_at(empty_store_url, _to("0018"))
    job = make_job()
    engine = create_engine(empty_store_url)
    try:
        async with engine.begin() as connection:
            await connection.execute(insert(jobs).values(_row_before_0019(job)))
    finally:
        await engine.dispose()

    store = await open_store(empty_store_url)  # migrated to head
    try:
        assert (await store.get_job(job.id)).delete_after_success is False  # the server default
        once = make_job(
            id="j-once", name="once", schedule="@at 2030-01-01T00:00:00Z", delete_after_success=True
        )
        assert (await store.create_job(once)).delete_after_success is True
    finally:
        await store.close()
    assert await _diff_at(empty_store_url, metadata) == []

    await run_sync_at(empty_store_url, _to("0018", down=True))
    engine = create_engine(empty_store_url)
    try:
        async with engine.connect() as connection:
            assert "delete_after_success" not in await connection.run_sync(
                lambda sync: _columns(sync, "jobs")
            )
            assert set(await connection.scalars(select(jobs.c.id))) == {job.id, once.id}
    finally:
        await engine.dispose()


async def test_0020_adds_triggers_to_a_0019_database_and_downgrades_without_it(empty_store_url: str) -> None:
    """The queue's table on both databases; on PostgreSQL with room on its pages and an eager
    autovacuum."""
    await run_sync_at(empty_store_url, _to("0019"))
    engine = create_engine(empty_store_url)
    try:
        async with engine.connect() as connection:
            assert "triggers" not in await connection.run_sync(lambda sync: inspect(sync).get_table_names())
        await run_sync_at(empty_store_url, _to("0020"))
        assert (
            await _diff_at(
                empty_store_url, _metadata_without({*COORDINATION, "dead_triggers", *RUN_FILTER_INDEXES})
            )
            == []
        )
        async with engine.begin() as connection:
            await connection.execute(
                insert(triggers).values(
                    id=1, queue="q", run_id="r", job_id="j", available_at=START, deliveries=0
                )
            )
            assert list(await connection.scalars(select(triggers.c.run_id))) == ["r"]
        if engine.dialect.name == "postgresql":
            assert await _options(engine, "triggers") == [
                "fillfactor=80",
                "autovacuum_vacuum_scale_factor=0.01",
            ]
        await run_sync_at(empty_store_url, _to("0019", down=True))
        async with engine.connect() as connection:
            assert "triggers" not in await connection.run_sync(lambda sync: inspect(sync).get_table_names())
    finally:
        await engine.dispose()


async def test_0021_adds_the_coordination_tables_to_a_0020_database_and_downgrades_without_them(
    empty_store_url: str,
) -> None:
    """The PostgreSQL coordinator's members, duties and shards, on both databases."""
    await run_sync_at(empty_store_url, _to("0020"))
    engine = create_engine(empty_store_url)
    try:
        async with engine.connect() as connection:
            names = await connection.run_sync(lambda sync: inspect(sync).get_table_names())
            assert COORDINATION.isdisjoint(names)
        await run_sync_at(empty_store_url, _to("0021"))
        assert (
            await _diff_at(empty_store_url, _metadata_without({"dead_triggers", *RUN_FILTER_INDEXES})) == []
        )
        async with engine.begin() as connection:
            await connection.execute(insert(coordination_shards).values(shard=3, epoch=7))
            assert list(await connection.scalars(select(coordination_shards.c.epoch))) == [7]
        await run_sync_at(empty_store_url, _to("0020", down=True))
        async with engine.connect() as connection:
            names = await connection.run_sync(lambda sync: inspect(sync).get_table_names())
            assert COORDINATION.isdisjoint(names)
            assert "triggers" in names
    finally:
        await engine.dispose()


async def test_0022_adds_dead_triggers_to_a_0021_database_and_downgrades_without_it(
    empty_store_url: str,
) -> None:
    """The PostgreSQL queue's dead letters, on both databases; the triggers table is kept."""
    await run_sync_at(empty_store_url, _to("0021"))
    engine = create_engine(empty_store_url)
    try:
        async with engine.connect() as connection:
            tables = await connection.run_sync(lambda sync: inspect(sync).get_table_names())
            assert "dead_triggers" not in tables
        await run_sync_at(empty_store_url, _to("0022"))
        assert await _diff_at(empty_store_url, _metadata_without(RUN_FILTER_INDEXES)) == []
        async with engine.begin() as connection:
            await connection.execute(
                insert(dead_triggers).values(
                    id=1, queue="q", trigger_id=7, run_id="r", job_id="j", deliveries=10, dead_at=START
                )
            )
            assert list(await connection.scalars(select(dead_triggers.c.trigger_id))) == [7]
        await run_sync_at(empty_store_url, _to("0021", down=True))
        async with engine.connect() as connection:
            tables = await connection.run_sync(lambda sync: inspect(sync).get_table_names())
            assert "dead_triggers" not in tables
            assert "triggers" in tables
    finally:
        await engine.dispose()


async def test_the_alembic_command_line_path_makes_its_own_engine(empty_store_url: str) -> None:
    """env.py without a handed-over connection (``alembic -x url=... upgrade head``)."""
    config = alembic_config()
    config.set_main_option("sqlalchemy.url", empty_store_url.replace("%", "%%"))
    await asyncio.to_thread(command.upgrade, config, "head")
    assert await _diff_at(empty_store_url, metadata) == []


async def test_open_store_without_migrating_refuses_an_old_schema(empty_store_url: str) -> None:
    with pytest.raises(SchemaOutdatedError):
        await open_store(empty_store_url, migrate=False)
    await upgrade_database(empty_store_url)
    store = await open_store(empty_store_url, migrate=False)
    await store.close()


async def test_sqlite_connections_are_set_up(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'pragmas.db'}"
    engine = create_engine(url)
    try:
        connections = [await engine.connect() for _ in range(3)]  # three pooled connections
        for connection in connections:
            values = [
                (await connection.execute(text(f"PRAGMA {name}"))).scalar()
                for name in ("journal_mode", "synchronous", "foreign_keys", "busy_timeout", "cache_size")
            ]
            assert values == ["wal", 1, 1, 5000, -32768]
        for connection in connections:
            await connection.close()
    finally:
        await engine.dispose()


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("sqlite:///x.db", "sqlite+aiosqlite:///x.db"),
        ("sqlite+aiosqlite:////abs/x.db", "sqlite+aiosqlite:////abs/x.db"),
        ("postgresql://u:p@h:5432/db", "postgresql+asyncpg://u:***@h:5432/db"),
        ("postgres://h/db", "postgresql+asyncpg://h/db"),
        ("postgresql+asyncpg://h/db", "postgresql+asyncpg://h/db"),
    ],
)
def test_urls_get_their_async_driver(url: str, expected: str) -> None:
    assert str(async_url(url)) == expected


@pytest.mark.parametrize(
    "url", ["sqlite://", "sqlite:///:memory:", "mysql://h/db", "postgresql+psycopg2://h/db"]
)
def test_unsupported_urls_are_refused(url: str) -> None:
    with pytest.raises(InvalidInputError):
        async_url(url)


class _PgError(Exception):
    def __init__(self, sqlstate: str, message: str) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


def _raise(error: Exception) -> None:
    with translated_errors():
        raise error


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (exc.IntegrityError("INSERT", {}, Exception("UNIQUE constraint failed: jobs.team")), ConflictError),
        (exc.IntegrityError("INSERT", {}, Exception("FOREIGN KEY constraint failed")), NotFoundError),
        (exc.OperationalError("UPDATE", {}, Exception("database is locked")), BackendUnavailableError),
        (exc.InterfaceError("SELECT", {}, Exception("connection closed")), BackendUnavailableError),
        (ConnectionRefusedError(111, "Connection refused"), BackendUnavailableError),
        (exc.StatementError("bad value", "INSERT", {}, ValueError("naive datetime")), InvalidInputError),
        (exc.DBAPIError("UPDATE", {}, _PgError("40P01", "deadlock detected")), TransientError),
        (exc.OperationalError("UPDATE", {}, _PgError("40001", "could not serialize")), TransientError),
        (exc.IntegrityError("INSERT", {}, _PgError("23503", "violates foreign key")), NotFoundError),
        (exc.IntegrityError("INSERT", {}, _PgError("23505", "duplicate key value")), ConflictError),
    ],
)
def test_driver_errors_are_translated(error: Exception, expected: type[Exception]) -> None:
    with pytest.raises(expected) as raised:
        _raise(error)
    assert raised.value.__cause__ is error


def test_other_errors_pass_through() -> None:
    with pytest.raises(KeyError):
        _raise(KeyError("x"))
    with pytest.raises(exc.ProgrammingError):
        _raise(exc.ProgrammingError("SELECT", {}, Exception("syntax error")))
    with pytest.raises(NotFoundError):
        _raise(NotFoundError("already ours"))


async def test_a_sqlite_upgrade_waits_out_a_lock_held_longer_than_busy_timeout(tmp_path: Path) -> None:
    """Seen in CI: four processes migrating one new SQLite file at once, under load, and the last
    one waited more than busy_timeout (5 s) behind the others: "database is locked". It waits on."""
    import sqlite3

    path = tmp_path / "locked.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA journal_mode=WAL")  # as every cronwheel connection sets it
    holder.execute("BEGIN IMMEDIATE")  # another process's long migration holds the write lock
    upgrade = asyncio.create_task(upgrade_database(f"sqlite:///{path}"))
    await asyncio.sleep(6.0)
    assert not upgrade.done()  # still waiting, not failed
    holder.execute("COMMIT")
    holder.close()
    await asyncio.wait_for(upgrade, 60)
    assert await _diff_at(f"sqlite:///{path}", metadata) == []


async def test_0006_adds_secrets_to_a_0005_database_and_downgrades_without_them(empty_store_url: str) -> None:
    await run_sync_at(empty_store_url, _to("0005"))
    job = make_job()
    engine = create_engine(empty_store_url)
    try:
        async with engine.begin() as connection:
            await connection.execute(insert(jobs).values(_row_before_0009(job)))
        await run_sync_at(empty_store_url, _to("0006"))
        store = await open_store(empty_store_url)
        try:
            assert (await store.get_job(job.id)).name == job.name
            secret = StoredSecret("ops", "token", "k1", b"\x01sealed", START, START)
            assert (await store.put_secret(secret))[1] is True
            assert (await store.get_secrets("ops", ["token"]))["token"].value == b"\x01sealed"
        finally:
            await store.close()
        await run_sync_at(empty_store_url, _to("0005", down=True))
        async with engine.connect() as connection:
            tables = await connection.run_sync(lambda sync: inspect(sync).get_table_names())
        assert "secrets" not in tables
        assert "api_tokens" in tables
        assert "jobs" in tables
    finally:
        await engine.dispose()


async def test_0007_adds_the_audit_log_to_a_0006_database_and_downgrades_without_it(
    empty_store_url: str,
) -> None:
    from cronwheel.audit import Actor, AuditAction, AuditQuery

    await run_sync_at(empty_store_url, _to("0006"))
    engine = create_engine(empty_store_url)
    try:
        async with engine.connect() as connection:
            tables = await connection.run_sync(lambda sync: inspect(sync).get_table_names())
        assert "audit_log" not in tables
        await run_sync_at(empty_store_url, _to("0007"))
        store = await open_store(empty_store_url)
        try:
            entry = Actor("token", "t1", "ci").entry(AuditAction.JOB_CREATE, START, "ops")
            await store.append_audit([entry])
            assert (await store.list_audit(AuditQuery())).items == [entry]
        finally:
            await store.close()
        await run_sync_at(empty_store_url, _to("0006", down=True))
        async with engine.connect() as connection:
            tables = await connection.run_sync(lambda sync: inspect(sync).get_table_names())
        assert "audit_log" not in tables
        assert "secrets" in tables
    finally:
        await engine.dispose()


async def test_0009_adds_retention_and_output_tails_and_downgrades_without_them(empty_store_url: str) -> None:
    from cronwheel.model import RetentionPolicy

    await run_sync_at(empty_store_url, _to("0007"))
    engine = create_engine(empty_store_url)
    try:
        job = make_job()
        async with engine.begin() as connection:
            await connection.execute(insert(jobs).values(_row_before_0009(job)))
        await run_sync_at(empty_store_url, _to("0009"))
        store = await open_store(empty_store_url)
        try:
            assert (await store.get_job(job.id)).retention is None  # the server's default
            await store.update_job(replace(job, retention=RetentionPolicy(keep_runs=3)), job.version)
            assert (await store.get_job(job.id)).retention == RetentionPolicy(keep_runs=3)
        finally:
            await store.close()
        await run_sync_at(empty_store_url, _to("0007", down=True))
        async with engine.connect() as connection:
            columns = await connection.run_sync(lambda sync: _columns(sync, "jobs"))
            tails = await connection.run_sync(lambda sync: _columns(sync, "attempts"))
        assert "retention" not in columns
        assert "output_tail" not in tails
        assert "labels" in columns
    finally:
        await engine.dispose()


async def test_0024_adds_live_output_and_response_headers_and_downgrades_without_them(
    empty_store_url: str,
) -> None:
    await run_sync_at(empty_store_url, _to("0023"))
    assert await _diff_at(empty_store_url, _metadata_without(set())) == []
    await run_sync_at(empty_store_url, _to("0024"))
    assert await _diff_at(empty_store_url, metadata) == []
    await run_sync_at(empty_store_url, _to("0023", down=True))
    engine = create_engine(empty_store_url)
    try:
        async with engine.connect() as connection:
            columns = await connection.run_sync(lambda sync: _columns(sync, "attempts"))
        assert {"output_at", "response_headers"}.isdisjoint(columns)
        assert "request_headers" in columns
    finally:
        await engine.dispose()


async def test_0010_adds_attempt_headers_and_downgrades_without_them(empty_store_url: str) -> None:
    await run_sync_at(empty_store_url, _to("0010"))
    engine = create_engine(empty_store_url)
    try:
        async with engine.connect() as connection:
            assert "request_headers" in await connection.run_sync(lambda sync: _columns(sync, "attempts"))
        await run_sync_at(empty_store_url, _to("0009", down=True))
        async with engine.connect() as connection:
            columns = await connection.run_sync(lambda sync: _columns(sync, "attempts"))
        assert "request_headers" not in columns
        assert "output_tail" in columns
    finally:
        await engine.dispose()


async def test_0011_adds_run_traceparents_and_downgrades_without_them(empty_store_url: str) -> None:
    await run_sync_at(empty_store_url, _to("0010"))
    engine = create_engine(empty_store_url)
    try:
        job = make_job()
        old = make_run(job, START, created_at=START)
        async with engine.begin() as connection:
            await connection.execute(insert(jobs).values(_job_row_before_0017(job)))
            row = {key: value for key, value in _run_row_before_0017(old).items() if key != "traceparent"}
            await connection.execute(insert(runs).values(row))
        await run_sync_at(empty_store_url, _to("0011"))
        store = await open_store(empty_store_url)
        try:
            assert (await store.get_run(old.id)).traceparent is None  # recorded before: no trace
            traced = make_run(job, START, id="r-traced", traceparent=TRACEPARENT, kind=RunKind.MANUAL)
            stored, _ = await store.create_manual_run(traced)
            assert stored.traceparent == TRACEPARENT
        finally:
            await store.close()
        await run_sync_at(empty_store_url, _to("0010", down=True))
        async with engine.connect() as connection:
            columns = await connection.run_sync(lambda sync: _columns(sync, "runs"))
        assert "traceparent" not in columns
        assert "epoch" in columns
    finally:
        await engine.dispose()


TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


async def test_0013_leaves_room_on_the_pages_of_runs_and_downgrades_without_it(empty_store_url: str) -> None:
    """PostgreSQL: ``runs`` gets fillfactor 80, and loses it again downgrading; SQLite has no
    such setting, and both directions are no-ops there."""
    await run_sync_at(empty_store_url, _to("0013"))
    engine = create_engine(empty_store_url)
    try:
        postgresql = engine.dialect.name == "postgresql"
        assert await _runs_options(engine) == (["fillfactor=80"] if postgresql else [])
        await run_sync_at(empty_store_url, _to("0012", down=True))
        assert await _runs_options(engine) == []
    finally:
        await engine.dispose()


async def _runs_options(engine: AsyncEngine) -> list[str]:
    return await _options(engine, "runs")


async def _options(engine: AsyncEngine, table: str) -> list[str]:
    """A table's storage parameters on PostgreSQL (none on SQLite)."""
    if engine.dialect.name != "postgresql":
        return []
    async with engine.connect() as connection:
        found = await connection.execute(
            text("SELECT reloptions FROM pg_class WHERE oid = to_regclass(:table)"), {"table": table}
        )
        return list(found.scalar_one() or [])


async def test_0017_adds_jitter_to_a_0016_database_and_downgrades_without_it(empty_store_url: str) -> None:
    await run_sync_at(empty_store_url, _to("0016"))
    engine = create_engine(empty_store_url)
    job = make_job()
    older = make_run(job, START, created_at=START)
    try:
        async with engine.begin() as connection:
            await connection.execute(insert(jobs).values(_job_row_before_0017(job)))
            await connection.execute(insert(runs).values(_run_row_before_0017(older)))
    finally:
        await engine.dispose()

    store = await open_store(empty_store_url)  # migrated to head
    try:
        assert (await store.get_job(job.id)).jitter_s == 0.0  # existing jobs fire at their slots
        assert (await store.get_run(older.id)).due_at is None
    finally:
        await store.close()
    assert await _diff_at(empty_store_url, metadata) == []

    await run_sync_at(empty_store_url, _to("0016", down=True))
    engine = create_engine(empty_store_url)
    try:
        async with engine.connect() as connection:
            assert "jitter_s" not in await connection.run_sync(lambda sync: _columns(sync, "jobs"))
            assert "due_at" not in await connection.run_sync(lambda sync: _columns(sync, "runs"))
            assert set(await connection.scalars(select(runs.c.id))) == {older.id}
    finally:
        await engine.dispose()

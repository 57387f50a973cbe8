"""Reads of runs and their history: one run, a batch of runs, pages, counts, attempts, events."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Select,
    String,
    and_,
    func,
    literal,
    or_,
    select,
    true,
    type_coerce,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncConnection

from cronwheel.errors import NotFoundError
from cronwheel.model import Attempt, Run, RunEvent, RunKind, RunState
from cronwheel.store import codec
from cronwheel.store.driver import flavor_of
from cronwheel.store.port import Page, RunChange, RunQuery, RunSample
from cronwheel.store.schema import (
    RUN_REASONED,
    RUN_STARTED_LATE,
    attempts,
    from_micros,
    jobs,
    run_events,
    runs,
    to_micros,
)
from cronwheel.store.sql.tx import CHUNK, Transactions, chunks
from cronwheel.store.sql.where import check_limit, latest_run_of_job


async def get(tx: Transactions, run_id: str) -> Run:
    async with tx.read() as connection:
        return await _run(connection, run_id)


async def get_with_team(tx: Transactions, run_id: str) -> tuple[Run, str]:
    """The run and its job's team (live or deleted) in one read."""
    statement = select(runs, jobs.c.team.label("job_team")).join(jobs, jobs.c.id == runs.c.job_id)
    async with tx.read() as connection:
        row = (await connection.execute(statement.where(runs.c.id == run_id))).mappings().first()
    if row is None:
        raise NotFoundError(f"run {run_id} not found")
    return codec.run_from_row(row), str(row["job_team"])


async def get_many(tx: Transactions, run_ids: Sequence[str]) -> dict[str, Run]:
    found: dict[str, Run] = {}
    async with tx.read() as connection:
        for chunk in chunks(sorted(set(run_ids)), CHUNK):
            result = await connection.execute(select(runs).where(runs.c.id.in_(chunk)))
            found.update((row["id"], codec.run_from_row(row)) for row in result.mappings())
    return found


async def list_page(tx: Transactions, query: RunQuery) -> Page[Run]:
    check_limit(query.limit)
    statement = select(runs).where(*_filters(query))
    if query.cursor is not None:
        micros, before_id = codec.decode_cursor(query.cursor, (int, str))
        slot = from_micros(micros)
        statement = statement.where(or_(runs.c.slot < slot, and_(runs.c.slot == slot, runs.c.id < before_id)))
    statement = statement.order_by(runs.c.slot.desc(), runs.c.id.desc()).limit(query.limit + 1)
    async with tx.read() as connection:
        rows = (await connection.execute(statement)).mappings().all()
    items = [codec.run_from_row(row) for row in rows[: query.limit]]
    if len(rows) <= query.limit:
        return Page(items)
    last = items[-1]
    return Page(items, codec.encode_cursor(to_micros(last.slot), last.id))


def _filters(query: RunQuery) -> list[ColumnElement[bool]]:
    """The query's filters; the page walks an index in (slot, id) order newest first, a time
    range being a range of it: ``ix_runs_slot_id`` (``ix_runs_job_id_slot`` for one job), or the
    partial index of the few runs with a reason, or started late, and applies the other filters to
    the rows it reads until the page is full."""
    where: list[ColumnElement[bool]] = []
    if query.job_id is not None:
        where.append(runs.c.job_id == query.job_id)
    if query.teams is not None:
        where.append(runs.c.job_id.in_(select(jobs.c.id).where(jobs.c.team.in_(sorted(set(query.teams))))))
    if query.team is not None:
        where.append(runs.c.job_id.in_(select(jobs.c.id).where(jobs.c.team == query.team)))
    if query.states:
        where.append(runs.c.state.in_([state.value for state in query.states]))
    if query.reasons:
        where += [RUN_REASONED, runs.c.reason.in_(sorted(set(query.reasons)))]
    if query.since is not None:
        where.append(runs.c.slot >= query.since)
    if query.until is not None:
        where.append(runs.c.slot < query.until)
    if query.late:
        where.append(RUN_STARTED_LATE)
    return where


async def count(tx: Transactions, states: Sequence[RunState]) -> dict[RunState, int]:
    if not states:
        return {}
    async with tx.read() as connection:
        result = await connection.execute(
            select(runs.c.state, func.count().label("n"))
            .where(runs.c.state.in_(sorted({state.value for state in states})))
            .group_by(runs.c.state)
        )
        return {RunState(row.state): row.n for row in result}


async def list_attempts(tx: Transactions, run_id: str) -> list[Attempt]:
    async with tx.read() as connection:
        await _run(connection, run_id)
        result = await connection.execute(
            select(attempts).where(attempts.c.run_id == run_id).order_by(attempts.c.number)
        )
        return [codec.attempt_from_row(row) for row in result.mappings()]


async def list_events(tx: Transactions, run_id: str) -> list[RunEvent]:
    async with tx.read() as connection:
        await _run(connection, run_id)
        result = await connection.execute(
            select(run_events).where(run_events.c.run_id == run_id).order_by(run_events.c.id)
        )
        return [codec.event_from_row(row) for row in result.mappings()]


async def last_runs(tx: Transactions, job_ids: Sequence[str]) -> dict[str, Run]:
    found: dict[str, Run] = {}
    async with tx.read() as connection:
        for chunk in chunks(sorted(set(job_ids)), CHUNK):
            latest_ids = select(latest_run_of_job(runs.c.id)).where(jobs.c.id.in_(chunk))
            result = await connection.execute(select(runs).where(runs.c.id.in_(latest_ids)))
            for row in result.mappings():
                found[row["job_id"]] = codec.run_from_row(row)
    return found


def _micros(column: Any) -> ColumnElement[int]:
    """An instant column as its stored integer (epoch microseconds), for arithmetic."""
    return type_coerce(column, BigInteger())


def _due(table: Any) -> ColumnElement[Any]:
    """When a run was due: its jittered fire time, else its slot (lateness is measured from it)."""
    return func.coalesce(table.c.due_at, table.c.slot)


def _sampled(table: Any) -> list[ColumnElement[Any]]:
    """The columns of a :class:`RunSample`, lateness and duration subtracted in the database."""
    return [
        table.c.job_id,
        table.c.slot,
        table.c.id,
        table.c.state,
        (_micros(table.c.queued_at) - _micros(_due(table))).label("lateness_us"),
        (_micros(table.c.finished_at) - _micros(table.c.started_at)).label("duration_us"),
    ]


def _recent_statement(connection: AsyncConnection, job_ids: list[str], per_job: int) -> Select[Any]:
    """Each of ``job_ids``' ``per_job`` newest runs, as one statement (``Flavor.lateral``)."""
    if flavor_of(connection.dialect).lateral:
        listed = func.unnest(literal(job_ids, ARRAY(String))).table_valued("id").render_derived(name="listed")
        newest = (
            select(*_sampled(runs))
            .where(runs.c.job_id == listed.c.id)
            .order_by(runs.c.slot.desc(), runs.c.id.desc())
            .limit(per_job)
            .lateral("newest")
        )
        return select(newest).select_from(listed).join(newest, true())
    picked = runs.alias("picked")
    newest_ids = (
        select(picked.c.id)
        .where(picked.c.job_id == jobs.c.id)
        .order_by(picked.c.slot.desc(), picked.c.id.desc())
        .limit(per_job)
        .correlate(jobs)
    )
    return (
        select(*_sampled(runs))
        .select_from(jobs)
        .join(runs, runs.c.id.in_(newest_ids))
        .where(jobs.c.id.in_(job_ids))
    )


async def recent(tx: Transactions, job_ids: Sequence[str], per_job: int) -> dict[str, list[RunSample]]:
    check_limit(per_job)
    found: dict[str, list[RunSample]] = {}
    async with tx.read() as connection:
        for chunk in chunks(sorted(set(job_ids)), CHUNK):
            result = await connection.execute(_recent_statement(connection, list(chunk), per_job))
            for row in result.mappings():
                found.setdefault(row["job_id"], []).append(_sample(row))
    for samples in found.values():
        samples.sort(key=lambda sample: sample.slot)
    return found


def _sample(row: Any) -> RunSample:
    state = RunState(row["state"])
    return RunSample(row["job_id"], row["slot"], state, row["lateness_us"], row["duration_us"])


async def fire_lateness(tx: Transactions, since: datetime, limit: int) -> list[int]:
    """Read through the (slot, id) index from the newest slot back to ``since``, at most
    ``limit`` rows: the cost is bounded whatever the history holds."""
    check_limit(limit)
    statement = (
        select((_micros(runs.c.queued_at) - _micros(_due(runs))).label("lateness_us"))
        .where(runs.c.slot >= since, runs.c.kind == RunKind.SCHEDULED.value, runs.c.queued_at.is_not(None))
        .order_by(runs.c.slot.desc(), runs.c.id.desc())
        .limit(limit)
    )
    async with tx.read() as connection:
        return [int(value) for value in (await connection.scalars(statement))]


async def changes(tx: Transactions, after: int | None, limit: int) -> list[RunChange]:
    """Run events above ``after`` (by the primary key), each with its run's job and team; with
    ``after`` None, only the newest."""
    check_limit(limit)
    statement = (
        select(run_events.c.id, run_events.c.run_id, run_events.c.state, runs.c.job_id, jobs.c.team)
        .join(runs, runs.c.id == run_events.c.run_id)
        .join(jobs, jobs.c.id == runs.c.job_id)
    )
    if after is None:
        statement = statement.order_by(run_events.c.id.desc()).limit(1)
    else:
        statement = statement.where(run_events.c.id > after).order_by(run_events.c.id).limit(limit)
    async with tx.read() as connection:
        rows = (await connection.execute(statement)).all()
    return [RunChange(int(row[0]), row[1], row[3], row[4], RunState(row[2])) for row in rows]


async def _run(connection: AsyncConnection, run_id: str) -> Run:
    row = (await connection.execute(select(runs).where(runs.c.id == run_id))).mappings().first()
    if row is None:
        raise NotFoundError(f"run {run_id} not found")
    return codec.run_from_row(row)

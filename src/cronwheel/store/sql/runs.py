"""Reads of runs and their history: one run, a batch of runs, pages, counts, attempts, events."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import and_, func, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection

from cronwheel.errors import NotFoundError
from cronwheel.model import Attempt, Run, RunEvent, RunState
from cronwheel.store import codec
from cronwheel.store.port import Page, RunQuery
from cronwheel.store.schema import attempts, from_micros, jobs, run_events, runs, to_micros
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
    statement = select(runs)
    if query.job_id is not None:
        statement = statement.where(runs.c.job_id == query.job_id)
    if query.teams is not None:
        of_teams = select(jobs.c.id).where(jobs.c.team.in_(sorted(set(query.teams))))
        statement = statement.where(runs.c.job_id.in_(of_teams))
    if query.states:
        statement = statement.where(runs.c.state.in_([state.value for state in query.states]))
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


async def _run(connection: AsyncConnection, run_id: str) -> Run:
    row = (await connection.execute(select(runs).where(runs.c.id == run_id))).mappings().first()
    if row is None:
        raise NotFoundError(f"run {run_id} not found")
    return codec.run_from_row(row)

"""The store's side of retention (:mod:`cronwheel.retention` decides, this reads and deletes):
each job's policy, the bounds of a job's history, its oldest runs a page at a time, and the
deletion of a batch of terminal runs with their attempts and events.

Every read is by index (``ix_runs_job_id_slot``, ``ix_runs_job_id_state_slot``) and every page is
keyset-paged, so that a pass over a job with a million runs never scans them again. A purge is
one short write transaction per batch: on SQLite it queues behind (and ahead of) the scheduler's
fire transactions on the store's write lock, holding it for one batch only; on PostgreSQL it
locks the batch's rows ``FOR UPDATE SKIP LOCKED``, so a row another transaction holds is left
for the next pass instead of waited for.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import and_, delete, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection

from cronwheel.model import RetentionPolicy, RunState
from cronwheel.retention import HistoryBounds, RunStub
from cronwheel.store import codec
from cronwheel.store.schema import attempts, jobs, run_events, runs
from cronwheel.store.sql import last_runs
from cronwheel.store.sql.tx import CHUNK, Transactions, chunks
from cronwheel.store.sql.where import check_limit

TERMINAL_VALUES = sorted(state.value for state in RunState if state.terminal)


async def job_policies(
    tx: Transactions, after: str | None, limit: int
) -> list[tuple[str, RetentionPolicy | None]]:
    """Every job (live or deleted: a deleted job's runs stay until retention takes them), by id
    after ``after``, with its own policy (None: the server's default)."""
    check_limit(limit)
    statement = select(jobs.c.id, jobs.c.retention).order_by(jobs.c.id).limit(limit)
    if after is not None:
        statement = statement.where(jobs.c.id > after)
    async with tx.read() as connection:
        rows = (await connection.execute(statement)).all()
    return [(row.id, codec.retention_from_json(row.retention)) for row in rows]


async def history_bounds(tx: Transactions, job_id: str, keep_runs: int | None) -> HistoryBounds:
    async with tx.read() as connection:
        nth = await _nth_newest(connection, job_id, keep_runs) if keep_runs is not None else None
        latest = [await _latest_of(connection, job_id, state) for state in TERMINAL_VALUES]
    return HistoryBounds(nth, frozenset(run_id for run_id in latest if run_id is not None))


async def _nth_newest(connection: AsyncConnection, job_id: str, n: int) -> tuple[datetime, str] | None:
    check_limit(n)
    row = (
        await connection.execute(
            select(runs.c.slot, runs.c.id)
            .where(runs.c.job_id == job_id)
            .order_by(runs.c.slot.desc(), runs.c.id.desc())
            .offset(n - 1)
            .limit(1)
        )
    ).first()
    return None if row is None else (row.slot, row.id)


async def _latest_of(connection: AsyncConnection, job_id: str, state: str) -> str | None:
    statement = (
        select(runs.c.id)
        .where(runs.c.job_id == job_id, runs.c.state == state)
        .order_by(runs.c.slot.desc(), runs.c.id.desc())
        .limit(1)
    )
    value = (await connection.execute(statement)).scalar()
    return None if value is None else str(value)


async def oldest_runs(
    tx: Transactions, job_id: str, after: tuple[datetime, str] | None, limit: int
) -> list[RunStub]:
    """The job's runs oldest first (by slot, then id), after the key ``after``, at most ``limit``."""
    check_limit(limit)
    statement = select(runs.c.id, runs.c.slot, runs.c.state).where(runs.c.job_id == job_id)
    if after is not None:
        slot, run_id = after
        statement = statement.where(or_(runs.c.slot > slot, and_(runs.c.slot == slot, runs.c.id > run_id)))
    statement = statement.order_by(runs.c.slot, runs.c.id).limit(limit)
    async with tx.read() as connection:
        rows = (await connection.execute(statement)).all()
    return [RunStub(row.id, row.slot, RunState(row.state)) for row in rows]


async def purge(tx: Transactions, run_ids: Sequence[str]) -> int:
    """Delete the terminal runs among ``run_ids`` with their attempts and events, :data:`CHUNK`
    runs per write transaction; how many runs were deleted."""
    deleted = 0
    for chunk in chunks(sorted(set(run_ids)), CHUNK):
        async with tx.write() as connection:
            deleted += await _purge_chunk(connection, list(chunk))
    return deleted


async def _purge_chunk(connection: AsyncConnection, run_ids: list[str]) -> int:
    locked = (
        select(runs.c.job_id, runs.c.id)
        .where(runs.c.id.in_(run_ids), runs.c.state.in_(TERMINAL_VALUES))
        .with_for_update(skip_locked=True)  # PostgreSQL only: SQLite's writer is alone anyway
    )
    gone = [(row.job_id, row.id) for row in await connection.execute(locked)]
    if not gone:
        return 0
    going = [run_id for _, run_id in gone]
    await connection.execute(delete(run_events).where(run_events.c.run_id.in_(going)))
    await connection.execute(delete(attempts).where(attempts.c.run_id.in_(going)))
    result = await connection.execute(delete(runs).where(runs.c.id.in_(going)))
    await last_runs.forget(connection, gone)  # the last write: see last_runs on lock order
    return int(result.rowcount)

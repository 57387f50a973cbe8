"""Backfills: a job's requests to record runs for past slots, and the steps that record them.

:func:`create` stores a request (with its audit entry) in one transaction: once it returns the
backfill is accepted and will be carried through, by whichever backfiller runs next. Each
:func:`advance` is one transaction: the backfill is read at the cursor the backfiller saw (locked
on PostgreSQL; SQLite's write transaction holds the database), the step's runs are inserted
(``ON CONFLICT DO NOTHING`` on (job, slot): a slot that has a run keeps it and counts as existing),
and the cursor and counts move. A step whose backfill moved on writes nothing, so two backfillers,
or one that crashed and started again, record each slot once. :func:`cancel` ends a running
backfill under the same lock: a step after it finds the backfill no longer running and writes
nothing, so no run is created after a cancellation commits (those created before stay).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from sqlalchemy import insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from cronwheel import failpoints
from cronwheel.audit import AuditEntry
from cronwheel.errors import InvalidInputError, NotFoundError, NotRunningError
from cronwheel.model import Backfill, BackfillState, BackfillStep, Run, RunKind, utc_text
from cronwheel.store import codec
from cronwheel.store.schema import BACKFILL_RUNNING, backfills, jobs, runs
from cronwheel.store.sql import audit, bulk, last_runs
from cronwheel.store.sql.jobs import live_job
from cronwheel.store.sql.tx import Transactions
from cronwheel.store.sql.where import check_limit, check_new_run

SLOT_KINDS = [kind.value for kind in RunKind if kind.keyed_by_slot]


async def create(tx: Transactions, backfill: Backfill, now: datetime, entry: AuditEntry | None) -> Backfill:
    """Store ``backfill`` of a live job (``NotFoundError`` otherwise), with ``entry``."""
    stored = replace(backfill, created_at=backfill.created_at or now, updated_at=backfill.updated_at or now)
    async with tx.write() as connection:
        await live_job(connection, backfill.job_id)
        await connection.execute(insert(backfills).values(codec.backfill_to_row(stored)))
        after = {"backfill_id": stored.id, "from": _text(stored.start), "to": _text(stored.end)}
        await audit.write(connection, [None if entry is None else entry.changed(None, after)])
    return stored


async def cancel(tx: Transactions, backfill_id: str, now: datetime, entry: AuditEntry | None) -> Backfill:
    """End the running backfill ``cancelled`` (its cursor None: it goes on nowhere), with
    ``entry``; one that has ended already is refused (:class:`NotRunningError`, nothing written)."""
    async with tx.write() as connection:
        current = await _read(connection, backfill_id, lock=True)
        if current.state is not BackfillState.RUNNING:
            raise NotRunningError(
                f"backfill {backfill_id} is {current.state.value}, not running", current.state
            )
        cancelled = await _moved(connection, current, None, BackfillState.CANCELLED, now)
        before = {"backfill_id": current.id, "state": current.state.value, "next_slot": _text(current.cursor)}
        after = {"backfill_id": current.id, "state": cancelled.state.value, "created": cancelled.created}
        await audit.write(connection, [None if entry is None else entry.changed(before, after)])
    return cancelled


async def get(tx: Transactions, backfill_id: str) -> Backfill:
    async with tx.read() as connection:
        return await _read(connection, backfill_id)


async def of_job(tx: Transactions, job_id: str, limit: int) -> list[Backfill]:
    """The job's backfills, newest first."""
    check_limit(limit)
    statement = (
        select(backfills)
        .where(backfills.c.job_id == job_id)
        .order_by(backfills.c.created_at.desc(), backfills.c.id.desc())
        .limit(limit)
    )
    async with tx.read() as connection:
        return [codec.backfill_from_row(row) for row in (await connection.execute(statement)).mappings()]


async def running(tx: Transactions, limit: int) -> list[Backfill]:
    """The running backfills, oldest first (``ix_backfills_running``)."""
    check_limit(limit)
    statement = (
        select(backfills)
        .where(BACKFILL_RUNNING)
        .order_by(backfills.c.created_at, backfills.c.id)
        .limit(limit)
    )
    async with tx.read() as connection:
        return [codec.backfill_from_row(row) for row in (await connection.execute(statement)).mappings()]


async def slots_with_runs(tx: Transactions, job_id: str, start: datetime, end: datetime) -> set[datetime]:
    """The slots in [``start``, ``end``] of ``job_id`` that hold a run keyed by its slot."""
    statement = select(runs.c.slot).where(
        runs.c.job_id == job_id, runs.c.slot >= start, runs.c.slot <= end, runs.c.kind.in_(SLOT_KINDS)
    )
    async with tx.read() as connection:
        return set((await connection.scalars(statement)).all())


async def advance(tx: Transactions, step: BackfillStep, now: datetime) -> tuple[Backfill, list[Run]] | None:
    """One step (see the module docstring): the backfill as stored after it and the runs
    inserted, or None when the backfill is no longer running at the step's expected cursor
    (nothing written). A backfill whose job was deleted ends ``cancelled`` without its runs."""
    new_runs, next_cursor = step.runs, step.next_cursor
    for run in new_runs:
        check_new_run(run, step.job_id)
    async with tx.write() as connection:
        current = await _read(connection, step.backfill_id, lock=True)
        if current.state is not BackfillState.RUNNING or current.cursor != step.expected_cursor:
            return None
        if current.job_id != step.job_id:
            raise InvalidInputError(f"backfill {current.id} is of job {current.job_id}, not {step.job_id}")
        if not await _job_live(connection, current.job_id):
            return await _moved(connection, current, None, BackfillState.CANCELLED, now), []
        inserted = await bulk.insert_runs(connection, new_runs, now)
        failpoints.hit("store.backfill_before_progress")
        state = BackfillState.RUNNING if next_cursor is not None else BackfillState.DONE
        counted = replace(
            current,
            created=current.created + len(inserted),
            existing=current.existing + len(new_runs) - len(inserted),
        )
        moved = await _moved(connection, counted, next_cursor, state, now)
        await last_runs.record(connection, inserted)  # the last write: see last_runs on lock order
        return moved, inserted


async def _moved(
    connection: AsyncConnection,
    backfill: Backfill,
    cursor: datetime | None,
    state: BackfillState,
    now: datetime,
) -> Backfill:
    moved = replace(backfill, cursor=cursor, state=state, updated_at=now)
    await connection.execute(
        update(backfills)
        .where(backfills.c.id == backfill.id)
        .values(
            cursor_at=cursor,
            state=state.value,
            created=moved.created,
            existing=moved.existing,
            updated_at=now,
        )
    )
    return moved


async def _read(connection: AsyncConnection, backfill_id: str, *, lock: bool = False) -> Backfill:
    statement = select(backfills).where(backfills.c.id == backfill_id)
    row = (await connection.execute(statement.with_for_update() if lock else statement)).mappings().first()
    if row is None:
        raise NotFoundError(f"backfill {backfill_id} not found")
    return codec.backfill_from_row(row)


async def _job_live(connection: AsyncConnection, job_id: str) -> bool:
    """Whether the job is live, its row locked ``FOR SHARE`` on PostgreSQL until the step commits:
    a delete waits for the step, and a step after a delete sees it (no run of a deleted job)."""
    deleted = select(jobs.c.deleted_at).where(jobs.c.id == job_id).with_for_update(read=True)
    row = (await connection.execute(deleted)).first()
    return row is not None and row.deleted_at is None


def _text(moment: datetime | None) -> str | None:
    return None if moment is None else utc_text(moment)

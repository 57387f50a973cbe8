"""The store-side backstop of at-least-once delivery: runs whose trigger may be lost, and
attempts whose worker went silent (its lease expired)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ColumnElement, and_, bindparam, case, func, literal, null, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from cronwheel.model import Outcome, Run, RunState
from cronwheel.store import codec
from cronwheel.store.port import MAX_LOST_ATTEMPTS
from cronwheel.store.schema import RUN_RUNNING, attempts, runs
from cronwheel.store.sql import bulk, last_runs
from cronwheel.store.sql.tx import Transactions
from cronwheel.store.sql.where import check_limit, instant, require_legal


async def runs_to_dispatch(
    tx: Transactions, now: datetime, queued_before: datetime, limit: int, unqueued_before: datetime | None
) -> list[Run]:
    check_limit(limit)
    never_queued: ColumnElement[bool] = runs.c.queued_at.is_(None)
    if unqueued_before is not None:
        # an armed run is released by its scheduler when due (its slot, or its jittered fire
        # time); the sweep only after that
        due = func.coalesce(runs.c.due_at, runs.c.slot)
        never_queued = and_(never_queued, runs.c.created_at < unqueued_before, due <= unqueued_before)
    pending = (
        select(runs)
        .where(
            runs.c.state == RunState.PENDING.value,
            or_(never_queued, runs.c.queued_at < queued_before),
        )
        .order_by(runs.c.slot, runs.c.id)
        .limit(limit)
    )
    retrying = (
        select(runs)
        .where(runs.c.state == RunState.RETRYING.value, runs.c.next_attempt_at <= now)
        .order_by(runs.c.next_attempt_at, runs.c.id)
        .limit(limit)
    )
    async with tx.read() as connection:
        found = [
            codec.run_from_row(row)
            for statement in (pending, retrying)
            for row in (await connection.execute(statement)).mappings()
        ]
    found.sort(key=lambda run: (run.next_attempt_at or run.slot, run.id))
    return found[:limit]


async def expire_leases(tx: Transactions, now: datetime, limit: int, cutoff: datetime) -> list[Run]:
    """``Store.expire_leases``: RUNNING runs whose lease ended before ``cutoff`` lose their
    attempt (LOST) and go to RETRYING, or to FAILED once they lost too many."""
    check_limit(limit)
    async with tx.write() as connection:
        result = await connection.execute(
            select(runs.c.id, runs.c.lease_owner)
            .where(RUN_RUNNING, runs.c.lease_expires_at < cutoff)
            .order_by(runs.c.lease_expires_at)
            .limit(limit)
        )
        owners: dict[str, str | None] = {row.id: row.lease_owner for row in result}
        if not owners:
            return []
        changed = await _lose_attempts(connection, list(owners), now, cutoff)
        if not changed:
            return []
        await connection.execute(
            update(attempts)
            .where(attempts.c.run_id == bindparam("b_run"), attempts.c.number == bindparam("b_number"))
            .values(finished_at=now, outcome=Outcome.LOST.value, error="lease expired"),
            [{"b_run": run.id, "b_number": run.attempts} for run in changed],
        )
        events = []
        for run in changed:
            require_legal(RunState.RUNNING, run.state)
            detail = f"lease of {owners[run.id]} expired"
            events.append(
                bulk.event_values(run.id, now, run.state, RunState.RUNNING, run.attempts, None, detail)
            )
        await bulk.insert_events(connection, events)
        await last_runs.record(connection, changed)
        return changed


async def _lose_attempts(
    connection: AsyncConnection, run_ids: list[str], now: datetime, cutoff: datetime
) -> list[Run]:
    """RUNNING -> RETRYING (due now) or FAILED for the runs still expired; in id order."""
    gives_up = runs.c.lost_attempts + 1 >= MAX_LOST_ATTEMPTS
    result = await connection.execute(
        update(runs)
        .where(runs.c.id.in_(run_ids), RUN_RUNNING, runs.c.lease_expires_at < cutoff)
        .values(
            state=case((gives_up, literal(RunState.FAILED.value)), else_=literal(RunState.RETRYING.value)),
            next_attempt_at=case((gives_up, null()), else_=instant(now)),
            finished_at=case((gives_up, instant(now)), else_=null()),
            reason=case(
                (gives_up, literal(f"lost {MAX_LOST_ATTEMPTS} attempts (worker leases expired)")),
                else_=runs.c.reason,
            ),
            lost_attempts=runs.c.lost_attempts + 1,
            lease_owner=None,
            lease_expires_at=None,
        )
        .returning(*runs.c)
    )
    return sorted((codec.run_from_row(row) for row in result.mappings()), key=lambda r: r.id)

"""Armed runs: scheduled runs recorded before their slot.

A scheduler that arms ahead (``Scheduler(arm_ahead_s=...)``) writes a slot's run with the fire
transaction some seconds before the slot, and queues its trigger only shortly before the slot
(``release_ahead_s``; the worker holds it until the slot). Until released the run is PENDING with
``queued_at`` NULL and its slot in the future; released, ``queued_at`` is set and the run stays
PENDING until a worker claims it, which the claim refuses before the slot
(:mod:`cronwheel.store.sql.leases`). Two things read or change them:

* :func:`disarm`, in the transaction of every write that bumps a job's version (edit, pause,
  resume, delete): the job's PENDING scheduled runs whose slot is still ahead, released or not,
  are deleted with their first history event (no attempt can have started before the slot), its
  ``job_last_run`` row is corrected, and the caller moves the cursor back to the first removed
  slot, so that the job's current version arms (or, paused, records) that slot again. No SKIPPED
  record is left: a removed armed run never ran for anyone; a worker holding its trigger finds
  the run gone at the slot and drops the trigger.
* :func:`unreleased`: a scheduler that loads or gains shards takes over their armed runs and
  releases them at their slot (those whose slot has passed at once).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import ColumnElement, and_, delete, func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from cronwheel.model import Run, RunKind, RunState
from cronwheel.store import codec
from cronwheel.store.schema import jobs, run_events, runs
from cronwheel.store.sql import last_runs
from cronwheel.store.sql.tx import Transactions
from cronwheel.store.sql.where import check_limit


def _unstarted() -> ColumnElement[bool]:
    return and_(runs.c.state == RunState.PENDING.value, runs.c.kind == RunKind.SCHEDULED.value)


def _unreleased() -> ColumnElement[bool]:
    return and_(_unstarted(), runs.c.queued_at.is_(None))


async def disarm(connection: AsyncConnection, job_id: str, now: datetime) -> datetime | None:
    """Delete ``job_id``'s armed runs due after ``now`` (their slot, or their jittered fire
    time), released or not (see the
    module docstring); returns the first removed slot (None: there were none). Call it with the
    job's row locked."""
    found = await connection.execute(  # locked in id order, as claims lock: a claim waits, or wins
        select(runs.c.id, runs.c.slot)
        .where(runs.c.job_id == job_id, _unstarted(), func.coalesce(runs.c.due_at, runs.c.slot) > now)
        .order_by(runs.c.id)
        .with_for_update()
    )
    armed = [(row.id, row.slot) for row in found]
    if not armed:
        return None
    ids = [run_id for run_id, _ in armed]
    await connection.execute(delete(run_events).where(run_events.c.run_id.in_(ids)))
    await connection.execute(delete(runs).where(runs.c.id.in_(ids), _unstarted()))
    await last_runs.forget(connection, [(job_id, run_id) for run_id in ids])
    first: datetime = min(slot for _, slot in armed)
    return first


async def unreleased(tx: Transactions, shards: Sequence[int] | None, limit: int) -> list[Run]:
    """The armed (PENDING, never queued, scheduled) runs of ``shards`` (None: every shard),
    oldest slot first, at most ``limit``."""
    check_limit(limit)
    if shards is not None and not shards:
        return []
    statement = select(runs).where(_unreleased())
    if shards is not None:
        owned = select(jobs.c.id).where(jobs.c.shard.in_(sorted(set(shards))))
        statement = statement.where(runs.c.job_id.in_(owned))
    statement = statement.order_by(runs.c.slot, runs.c.id).limit(limit)
    async with tx.read() as connection:
        rows = (await connection.execute(statement)).mappings().all()
    return [codec.run_from_row(row) for row in rows]

"""Runs on the scheduler side: due jobs, shard epochs (fencing), firing, manual runs.

:func:`fire` is the scheduler's one transaction per batch (guarantee 1: the store decides): read
which shards are still held, move the cursors that are still where the scheduler saw them, tell
fenced from stale among the refused, insert the runs of the moved ones, flag the runs that
overlap=replace replaces. Its bulk statements are in :mod:`cronwheel.store.sql.bulk`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Select, Text, bindparam, cast, select, tuple_
from sqlalchemy.ext.asyncio import AsyncConnection

from cronwheel.audit import AuditEntry
from cronwheel.errors import ConflictError
from cronwheel.model import DueJob, FireResult, Firing, Run, RunState
from cronwheel.store import codec
from cronwheel.store.driver import upsert
from cronwheel.store.schema import JOB_DUE, jobs, runs, shard_epochs
from cronwheel.store.sql import audit, bulk, last_runs
from cronwheel.store.sql.cancels import request_cancel
from cronwheel.store.sql.jobs import live_job
from cronwheel.store.sql.tx import CHUNK, Transactions, chunks
from cronwheel.store.sql.where import ACTIVE_VALUES, check_limit, check_new_run

# -- due jobs and shards ---------------------------------------------------------------------------


# The columns a scheduler reads of a due job (:class:`~cronwheel.model.DueJob`): not the target,
# payload or labels, whose decoding was most of the cost of loading a wheel (the misfire policy is
# read as its JSON text, decoded once per distinct text by the codec).
DUE_COLUMNS = (
    jobs.c.id, jobs.c.team, jobs.c.version, jobs.c.next_run_at, jobs.c.schedule, jobs.c.timezone,
    jobs.c.dst_gap, jobs.c.dst_fold, cast(jobs.c.misfire, Text).label("misfire"), jobs.c.overlap,
    jobs.c.queue, jobs.c.start_at, jobs.c.end_at, jobs.c.paused, jobs.c.deleted_at, jobs.c.jitter_s,
    cast(jobs.c.calendar_spec, Text).label("calendar_spec"), jobs.c.calendar_shift,
)  # fmt: skip


def due_jobs_statement(
    until: datetime, shards: Sequence[int] | None, limit: int, after: tuple[datetime, str] | None = None
) -> Select[Any]:
    """The query of ``due_jobs``. Its WHERE contains ``JOB_DUE`` literally, so both databases use
    the partial index ``ix_jobs_due`` (shard, next_run_at) for a few shards (PostgreSQL: one
    index range per shard, ``shard = ANY(...) AND next_run_at <= until``, then a sort of only the
    due rows; checked by ``tests/store/test_indexes.py``) and ``ix_jobs_due_at`` (next_run_at, id)
    for many or none: its order is the keyset's, so a page after ``after`` is one index range that
    stops at the limit (on ``next_run_at`` alone, each page read and sorted every job of its
    second)."""
    statement = select(*DUE_COLUMNS).where(JOB_DUE, jobs.c.next_run_at <= until)
    if after is not None:  # keyset paging: strictly after (next_run_at, id), a range of ix_jobs_due_at
        at, job_id = after
        bound = tuple_(bindparam(None, at, jobs.c.next_run_at.type), bindparam(None, job_id, jobs.c.id.type))
        statement = statement.where(tuple_(jobs.c.next_run_at, jobs.c.id) > bound)
    if shards is not None:
        statement = statement.where(jobs.c.shard.in_(sorted(set(shards))))
    return statement.order_by(jobs.c.next_run_at, jobs.c.id).limit(limit)


async def due_jobs(
    tx: Transactions,
    until: datetime,
    shards: Sequence[int] | None,
    limit: int,
    after: tuple[datetime, str] | None,
) -> list[DueJob]:
    if shards is not None and not shards:
        return []
    check_limit(limit)
    statement = due_jobs_statement(until, shards, limit, after)
    async with tx.read() as connection:
        rows = (await connection.execute(statement)).mappings().all()
    return [codec.due_job_from_row(row) for row in rows]


async def claim_shards(tx: Transactions, leases: Mapping[int, int], node: str, now: datetime) -> set[int]:
    """One upsert (``ON CONFLICT DO UPDATE ... WHERE stored epoch <= new epoch RETURNING``):
    the rows it returns are exactly the shards now stored at the given epoch. On PostgreSQL
    the row lock of the update waits for firing transactions that hold the shard's row
    (``FOR SHARE``, see :func:`fire`), so once this returns no firing under an older epoch
    can still commit."""
    if not leases:
        return set()
    rows = [
        {"shard": shard, "epoch": leases[shard], "node": node, "updated_at": now}
        for shard in sorted(leases)  # one lock order for every writer: no deadlocks
    ]
    claimed: set[int] = set()
    async with tx.write() as connection:
        statement = upsert(connection.dialect, shard_epochs)
        newer = statement.excluded
        statement = statement.on_conflict_do_update(
            index_elements=[shard_epochs.c.shard],
            set_={"epoch": newer.epoch, "node": newer.node, "updated_at": newer.updated_at},
            where=shard_epochs.c.epoch <= newer.epoch,
        )
        for chunk in chunks(rows, CHUNK):
            result = await connection.execute(statement.returning(shard_epochs.c.shard), chunk)
            claimed.update(result.scalars())
    return claimed


async def shard_owners(tx: Transactions) -> dict[int, tuple[str, int]]:
    async with tx.read() as connection:
        result = await connection.execute(
            select(shard_epochs.c.shard, shard_epochs.c.node, shard_epochs.c.epoch)
        )
        return {row.shard: (row.node, row.epoch) for row in result}


# -- firing ----------------------------------------------------------------------------------------


async def fire(
    tx: Transactions, firings: Sequence[Firing], now: datetime, epochs: Mapping[int, int] | None
) -> FireResult:
    """``Store.fire`` in one transaction (see the module docstring for its steps)."""
    for firing in firings:
        for run in firing.runs:
            check_new_run(run, firing.job_id)
    if not firings:
        return FireResult()
    async with tx.write() as connection:
        held = None if epochs is None else await _held_shards(connection, epochs)
        applied = await _advance_cursors(connection, firings, held)
        refused = [firing.job_id for index, firing in enumerate(firings) if index not in applied]
        fenced = set() if held is None else await _outside_shards(connection, set(refused), held)
        chosen = [firing for index, firing in enumerate(firings) if index in applied]
        inserted = await _record_runs(connection, chosen, now, epochs)
    return _result(inserted, refused, fenced)


async def _record_runs(
    connection: AsyncConnection, chosen: Sequence[Firing], now: datetime, epochs: Mapping[int, int] | None
) -> list[Run]:
    """Insert the runs of the firings applied, flag the runs they replace, note the last runs."""
    inserted = await bulk.insert_runs(connection, [run for f in chosen for run in f.runs], now, epochs)
    await request_cancel(connection, [run_id for f in chosen for run_id in f.cancel_run_ids])
    await last_runs.record(connection, inserted)  # the last write: see last_runs on lock order
    return inserted


def _result(inserted: Sequence[Run], refused: Sequence[str], fenced: set[str]) -> FireResult:
    return FireResult(
        accepted=[run for run in inserted if run.state is RunState.PENDING],
        skipped=[run for run in inserted if run.state is RunState.SKIPPED],
        stale_job_ids=[job_id for job_id in refused if job_id not in fenced],
        fenced_job_ids=[job_id for job_id in refused if job_id in fenced],
    )


async def _held_shards(connection: AsyncConnection, epochs: Mapping[int, int]) -> set[int]:
    """Which shards of ``epochs`` are stored at exactly the given epoch. On PostgreSQL the rows
    read are locked ``FOR SHARE`` (in shard order) until the transaction ends: a concurrent
    ``claim_shards`` waits for this firing, and a firing that starts after a claim sees it."""
    held: set[int] = set()
    for chunk in chunks(sorted(epochs), CHUNK):
        result = await connection.execute(
            select(shard_epochs.c.shard, shard_epochs.c.epoch)
            .where(shard_epochs.c.shard.in_(chunk))
            .order_by(shard_epochs.c.shard)
            .with_for_update(read=True)  # FOR SHARE on PostgreSQL; SQLite has no row locks
        )
        held.update(row.shard for row in result if row.epoch == epochs[row.shard])
    return held


async def _advance_cursors(
    connection: AsyncConnection, firings: Sequence[Firing], held: set[int] | None
) -> set[int]:
    """Move the cursors of ``firings`` that still hold (version, cursor, live, in a ``held``
    shard); returns the indexes of the firings applied. A job fired twice in one batch moves
    twice, in order: one conditional UPDATE per round of firings of distinct jobs."""
    applied: set[int] = set()
    for batch in _rounds_of_distinct_jobs(firings):
        moved = await bulk.advance_cursors(connection, [firing for _, firing in batch], held)
        applied.update(index for index, firing in batch if firing.job_id in moved)
    return applied


def _rounds_of_distinct_jobs(firings: Sequence[Firing]) -> list[list[tuple[int, Firing]]]:
    """Firings grouped so that no group names a job twice; applied group after group, this is
    the same as applying them one by one in order."""
    rounds: list[list[tuple[int, Firing]]] = []
    seen: dict[str, int] = {}
    for index, firing in enumerate(firings):
        number = seen.get(firing.job_id, 0)
        seen[firing.job_id] = number + 1
        if number == len(rounds):
            rounds.append([])
        rounds[number].append((index, firing))
    return rounds


async def _outside_shards(connection: AsyncConnection, job_ids: Iterable[str], held: set[int]) -> set[str]:
    """The jobs of ``job_ids`` that exist and are not in a ``held`` shard (fenced firings)."""
    found: set[str] = set()
    for chunk in chunks(sorted(job_ids), CHUNK):
        result = await connection.execute(select(jobs.c.id, jobs.c.shard).where(jobs.c.id.in_(chunk)))
        found.update(row.id for row in result if row.shard not in held)
    return found


# -- what firing reads and adds --------------------------------------------------------------------


async def active_runs(tx: Transactions, job_ids: Sequence[str]) -> dict[str, list[Run]]:
    found: dict[str, list[Run]] = {job_id: [] for job_id in job_ids}
    async with tx.read() as connection:
        for chunk in chunks(list(found), CHUNK):
            result = await connection.execute(
                select(runs)
                .where(runs.c.job_id.in_(chunk), runs.c.state.in_(ACTIVE_VALUES))
                .order_by(runs.c.slot, runs.c.id)
            )
            for row in result.mappings():
                found[row["job_id"]].append(codec.run_from_row(row))
    return found


async def create_manual_run(
    tx: Transactions, run: Run, now: datetime, entry: AuditEntry | None = None
) -> tuple[Run, bool]:
    """Insert the manual run (and, when it is new, ``entry``, in the same transaction)."""
    check_new_run(run, run.job_id)
    async with tx.write() as connection:
        await live_job(connection, run.job_id)
        inserted = await bulk.insert_runs(connection, [run], run.created_at or now)
        await last_runs.record(connection, inserted)
        if inserted:
            after = {"run_id": inserted[0].id, "idempotency_key": run.idempotency_key}
            await audit.write(connection, [None if entry is None else entry.changed(None, after)])
            return inserted[0], True
        result = await connection.execute(
            select(runs).where(runs.c.job_id == run.job_id, runs.c.dedup_key == run.dedup_key)
        )
        row = result.mappings().first()
    if row is None:
        raise ConflictError(f"run id {run.id} is already taken by another run")
    return codec.run_from_row(row), False

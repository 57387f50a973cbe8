"""Runs on the worker side: queued stamps, claims (PENDING/RETRYING -> RUNNING under a lease),
heartbeats, outcomes, cancellation flags and failures without an attempt.

A claim and an outcome are batch writes: ``SqlStore`` runs each over a worker's whole receive or
finisher batch in one transaction (:meth:`~cronwheel.store.sql.tx.Transactions.write_batches`),
chunk by chunk in id order, the lock order of every batch write of runs. The conditions that
must not steer PostgreSQL's plan are checked :func:`~cronwheel.store.sql.where.on_the_row` of
runs found by primary key (:func:`~cronwheel.store.sql.where.runs_listed`); issue #6 measured why.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, and_, bindparam, case, insert, or_, select, true, update
from sqlalchemy.ext.asyncio import AsyncConnection

from cronwheel import failpoints
from cronwheel.model import Outcome, Run, RunState
from cronwheel.store import codec
from cronwheel.store.port import AttemptResult, Finish
from cronwheel.store.schema import Instant, attempts, runs
from cronwheel.store.sql import bulk, last_runs
from cronwheel.store.sql.tx import CHUNK, Transactions, chunks, racing
from cronwheel.store.sql.where import (
    ACTIVE_VALUES,
    CLAIMABLE,
    CLAIMABLE_VALUES,
    instant,
    lease_held,
    listed_per_statement,
    on_the_row,
    require_legal,
    runs_listed,
)

DETAIL_MAX = 500  # characters of an event's detail


async def mark_queued(tx: Transactions, run_ids: Sequence[str], now: datetime) -> None:
    """``Store.mark_queued``: statements that each commit on their own (one, in autocommit, on
    PostgreSQL), since a stamp needs no common transaction."""
    ids = sorted(set(run_ids))  # id order: the lock order of every batch write of runs
    stampable = or_(runs.c.state.in_(CLAIMABLE_VALUES), runs.c.queued_at.is_(None))

    async def write() -> None:
        async with tx.write_each() as connection:
            for chunk in chunks(ids, listed_per_statement(connection, len(ids))):
                await connection.execute(
                    update(runs)
                    .where(runs_listed(connection, list(chunk)), on_the_row(stampable))
                    .values(queued_at=now)
                )

    await racing(write)


async def claim(
    connection: AsyncConnection, run_ids: Sequence[str], worker: str, now: datetime, lease_until: datetime
) -> dict[str, Run]:
    """Claim the due PENDING/RETRYING runs of ``run_ids``: one UPDATE per state they were read in
    (the UPDATE re-checks it, so a concurrent change makes a run drop out), then their attempts
    and RUNNING events in one statement each."""
    result = await connection.execute(select(runs.c.id, runs.c.state).where(runs.c.id.in_(run_ids)))
    by_state: dict[RunState, list[str]] = {}
    for run_id, state in result.all():
        if RunState(state) in CLAIMABLE:
            by_state.setdefault(RunState(state), []).append(run_id)
    claimed: dict[str, tuple[Run, RunState]] = {}
    for previous, ids in sorted(by_state.items(), key=lambda item: item[0].value):
        require_legal(previous, RunState.RUNNING)
        result = await connection.execute(
            update(runs)
            .where(runs_listed(connection, ids))
            .where(
                on_the_row(
                    and_(
                        runs.c.state == previous.value,
                        or_(runs.c.next_attempt_at.is_(None), runs.c.next_attempt_at <= now),
                    )
                )
            )
            .values(
                state=RunState.RUNNING.value,
                attempts=runs.c.attempts + 1,
                lease_owner=worker,
                lease_expires_at=lease_until,
                started_at=case((runs.c.started_at.is_(None), instant(now)), else_=runs.c.started_at),
                next_attempt_at=None,
            )
            .returning(*runs.c)
        )
        claimed.update((row["id"], (codec.run_from_row(row), previous)) for row in result.mappings())
    if claimed:
        rows = [{"run_id": run.id, "number": run.attempts, "worker": worker, "started_at": now}
                for run, _ in claimed.values()]  # fmt: skip
        await connection.execute(insert(attempts), rows)
        events = [bulk.event_values(run.id, now, run.state, previous, run.attempts, worker)
                  for run, previous in claimed.values()]  # fmt: skip
        await bulk.insert_events(connection, events)
    return {run_id: run for run_id, (run, _) in claimed.items()}


async def heartbeat(
    tx: Transactions, run_id: str, attempt: int, worker: str, lease_until: datetime
) -> Run | None:
    async with tx.write() as connection:
        result = await connection.execute(
            update(runs)
            .where(*lease_held(run_id, attempt, worker))
            .values(lease_expires_at=lease_until)
            .returning(*runs.c)
        )
        row = result.mappings().first()
    return None if row is None else codec.run_from_row(row)


def unique_finishes(finishes: Sequence[Finish]) -> list[Finish]:
    """The finishes of runs named once, in id order (a run named twice is left out)."""
    named = Counter(finish.run_id for finish in finishes)
    return sorted((f for f in finishes if named[f.run_id] == 1), key=lambda f: f.run_id)


async def finish(
    connection: AsyncConnection, finishes: Sequence[Finish], worker: str, now: datetime
) -> dict[str, Run]:
    """Record the outcomes whose lease ``worker`` still holds: one UPDATE of the runs per final
    state (a retry's own time each), one executemany for the attempts, one insert of events."""
    groups: dict[tuple[RunState, datetime | None], list[Finish]] = {}
    for one in finishes:
        state = _finished_state(one)
        key = (state, one.next_attempt_at if state is RunState.RETRYING else None)
        groups.setdefault(key, []).append(one)
    recorded: dict[str, Run] = {}
    for (state, next_at), group in groups.items():
        held = runs_listed(connection, [f.run_id for f in group], [f.attempt for f in group])
        result = await connection.execute(
            update(runs)
            .where(held)
            .where(on_the_row(and_(runs.c.state == RunState.RUNNING.value, runs.c.lease_owner == worker)))
            .values(lease_owner=None, lease_expires_at=None, next_attempt_at=next_at,
                    finished_at=now if state.terminal else None, state=state.value)
            .returning(*runs.c)
        )  # fmt: skip
        recorded.update((row["id"], codec.run_from_row(row)) for row in result.mappings())
    done = [one for one in finishes if one.run_id in recorded]
    if done:
        await connection.execute(_FINISH_ATTEMPT, [_attempt_outcome(one, now) for one in done])
        events = [
            bulk.event_values(f.run_id, now, recorded[f.run_id].state, RunState.RUNNING, f.attempt, worker,
                              _outcome_detail(f.result))
            for f in done
        ]  # fmt: skip
        await bulk.insert_events(connection, events)
    return recorded


def _finished_state(one: Finish) -> RunState:
    if one.result.outcome is Outcome.SUCCESS:
        return RunState.SUCCESS
    return RunState.RETRYING if one.next_attempt_at is not None else RunState.FAILED


_FINISH_ATTEMPT = (
    update(attempts)
    .where(attempts.c.run_id == bindparam("b_run_id"), attempts.c.number == bindparam("b_number"))
    .values(
        finished_at=bindparam("b_finished_at", type_=Instant()),
        outcome=bindparam("b_outcome"),
        status_code=bindparam("b_status_code"),
        exit_code=bindparam("b_exit_code"),
        error=bindparam("b_error"),
        output=bindparam("b_output"),
        retry_after_s=bindparam("b_retry_after_s"),
        output_tail=bindparam("b_output_tail"),
        request_headers=bindparam("b_request_headers", type_=attempts.c.request_headers.type),
    )
)


def _attempt_outcome(one: Finish, now: datetime) -> dict[str, Any]:
    result = one.result
    return {"b_run_id": one.run_id, "b_number": one.attempt, "b_finished_at": now,
            "b_outcome": result.outcome.value, "b_status_code": result.status_code,
            "b_exit_code": result.exit_code, "b_error": result.error, "b_output": result.output,
            "b_retry_after_s": result.retry_after_s, "b_output_tail": result.output_tail,
            "b_request_headers": codec.headers_to_json(result.request_headers)}  # fmt: skip


def _outcome_detail(result: AttemptResult) -> str:
    detail = result.outcome.value if result.error is None else f"{result.outcome}: {result.error}"
    return detail[:DETAIL_MAX]


# -- cancellation ----------------------------------------------------------------------------------


async def request_cancel(connection: AsyncConnection, run_ids: Sequence[str]) -> None:
    """Flag the unfinished runs of ``run_ids`` to stop (``cancel_requested``; not a state change,
    so no event): their workers see it at the next heartbeat or cancellation check."""
    failpoints.hit("store.before_cancel_flags")
    for chunk in chunks(list(run_ids), CHUNK):
        await connection.execute(
            update(runs)
            .where(runs.c.id.in_(chunk), runs.c.state.in_(ACTIVE_VALUES))
            .values(cancel_requested=true())
        )


async def cancel_active(connection: AsyncConnection, job_id: str) -> None:
    """Flag every unfinished run of the job to stop (it was deleted)."""
    failpoints.hit("store.before_cancel_flags")
    await connection.execute(
        update(runs)
        .where(runs.c.job_id == job_id, runs.c.state.in_(ACTIVE_VALUES))
        .values(cancel_requested=true())
    )


async def cancel_requested(tx: Transactions, run_ids: Sequence[str]) -> set[str]:
    found: set[str] = set()
    async with tx.read() as connection:
        for chunk in chunks(sorted(set(run_ids)), CHUNK):
            result = await connection.execute(
                select(runs.c.id).where(runs.c.id.in_(chunk), runs.c.cancel_requested == true())
            )
            found.update(result.scalars())
    return found


# -- failure without an attempt -----------------------------------------------------------------------


async def fail(tx: Transactions, run_id: str, reason: str, now: datetime) -> Run | None:
    """PENDING/RETRYING -> FAILED with ``reason`` and its event (``Store.fail_run``)."""
    async with tx.write() as connection:
        changed = await _transition(
            connection,
            run_id,
            RunState.FAILED,
            CLAIMABLE,
            conditions=[],
            values={"reason": reason, "finished_at": now, "next_attempt_at": None},
        )
        if changed is None:
            return None
        run, previous = changed
        event = bulk.event_values(run_id, now, run.state, previous, run.attempts, None, reason[:DETAIL_MAX])
        await bulk.insert_events(connection, [event])
        await last_runs.record(connection, [run])
        return run


async def _transition(
    connection: AsyncConnection,
    run_id: str,
    state: RunState,
    allowed_from: frozenset[RunState],
    *,
    conditions: Sequence[ColumnElement[bool]],
    values: Mapping[str, Any],
) -> tuple[Run, RunState] | None:
    """Move one run to ``state`` if it is in one of ``allowed_from`` and ``conditions`` hold;
    the UPDATE re-checks the state it read, so a concurrent change makes it a no-op. Returns the
    changed run and its previous state, or None."""
    current = await connection.scalar(select(runs.c.state).where(runs.c.id == run_id))
    if current is None or RunState(current) not in allowed_from:
        return None
    previous = RunState(current)
    require_legal(previous, state)
    result = await connection.execute(
        update(runs)
        .where(runs.c.id == run_id, runs.c.state == previous.value, *conditions)
        .values(state=state.value, **values)
        .returning(*runs.c)
    )
    row = result.mappings().first()
    return None if row is None else (codec.run_from_row(row), previous)

"""Runs on the worker side: queued stamps, claims (PENDING/RETRYING -> RUNNING under a lease),
heartbeats, outcomes, cancellation flags and failures without an attempt.

A claim and an outcome are batch writes: ``SqlStore`` runs each over a worker's whole receive or
finisher batch in one transaction (:meth:`~cronwheel.store.sql.tx.Transactions.write_batches`),
chunk by chunk in id order, the lock order of every batch write of runs. The conditions that
must not steer PostgreSQL's plan are checked :func:`~cronwheel.store.sql.where.checked_per_row` of
runs found by primary key (:func:`~cronwheel.store.sql.where.runs_listed`); ``docs/performance.md``
says why.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    String,
    TextualSelect,
    and_,
    bindparam,
    case,
    column,
    insert,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from cronwheel.model import AttemptResult, Finish, Job, Outcome, Run, RunKind, RunState
from cronwheel.store import codec
from cronwheel.store.driver import flavor_of
from cronwheel.store.schema import Instant, attempts, jobs, runs, to_micros
from cronwheel.store.sql import bulk, last_runs
from cronwheel.store.sql import jobs as jobs_of
from cronwheel.store.sql.tx import Transactions, chunks, retry_lost_races
from cronwheel.store.sql.where import (
    CLAIMABLE,
    CLAIMABLE_VALUES,
    checked_per_row,
    instant,
    lease_held,
    listed_per_statement,
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
                    .where(runs_listed(connection, list(chunk)), checked_per_row(stampable))
                    .values(queued_at=now)
                )

    await retry_lost_races(write)


Claimed = dict[str, tuple[Run, Job | None]]  # run id -> the claimed run and its job (None: deleted)


async def claim(
    connection: AsyncConnection,
    run_ids: Sequence[str],
    worker: str,
    now: datetime,
    lease_until: datetime,
    *,
    noted: bool = False,
) -> Claimed:
    """Claim the due PENDING/RETRYING runs of ``run_ids`` (due: slot and next attempt not after
    ``now``; a run is never claimed before its slot): each becomes RUNNING under
    ``worker``'s lease until ``lease_until``, with a new attempt and a RUNNING event, and is
    returned with its job as the attempt needs it. A run whose state changed since it was read
    drops out (the write re-checks the state it read). ``noted``: the claim is a whole
    transaction, and on PostgreSQL its one statement also notes the runs in ``job_last_run``
    (elsewhere the caller does, :func:`~cronwheel.store.sql.last_runs.record_claimed`)."""
    if flavor_of(connection.dialect).writes_in_with:
        statement = _CLAIM_NOTED if noted else _CLAIM_IN_ONE
        return await _claim_in_one_statement(connection, statement, run_ids, worker, now, lease_until)
    claimed = await _claim_read_then_write(connection, run_ids, worker, now, lease_until)
    found = await jobs_of.read_many(connection, [run.job_id for run in claimed.values()])
    claimed_with_jobs = {run_id: (run, found.get(run.job_id)) for run_id, run in claimed.items()}
    if noted:
        await last_runs.record_claimed(connection, claimed_with_jobs)
    return claimed_with_jobs


def _claimed_values(worker: str, now: datetime, lease_until: datetime) -> dict[str, Any]:
    """What a claim writes on each run."""
    return {
        "state": RunState.RUNNING.value,
        "attempts": runs.c.attempts + 1,
        "lease_owner": worker,
        "lease_expires_at": lease_until,
        "started_at": case((runs.c.started_at.is_(None), instant(now)), else_=runs.c.started_at),
        "next_attempt_at": None,
    }


def _due(now: datetime) -> ColumnElement[bool]:
    """Claimable at ``now``: its slot and its jittered fire time, if any, have come (a trigger
    released ahead is early) and so has its next attempt, if any."""
    return and_(
        runs.c.slot <= now,
        or_(runs.c.due_at.is_(None), runs.c.due_at <= now),
        or_(runs.c.next_attempt_at.is_(None), runs.c.next_attempt_at <= now),
    )


# PostgreSQL: ``UPDATE runs ... FROM`` the states this statement's snapshot read (``old``), the
# runs found by primary key from one array; each row is re-checked against the state it was read
# in (a concurrent change makes it drop out, as the read-then-write path's UPDATE does), and the
# attempts and RUNNING events are inserted from what the UPDATE returns, which comes back with each
# run's live job (``job__`` columns; NULL: deleted). One statement, one round trip where the
# statement-by-statement claim and job read took eight, and a text that never changes: planned
# once per connection.
_JOB_COLUMNS = [c.name for c in jobs.c]
_CLAIM_IN_ONE_SQL = """
WITH old AS (
  SELECT runs.id, runs.state AS previous
  FROM runs JOIN unnest(CAST(:run_ids AS varchar[])) AS listed(id) ON runs.id = listed.id
), claimed AS (
  UPDATE runs SET state = 'RUNNING', attempts = runs.attempts + 1, lease_owner = :worker,
    lease_expires_at = CAST(:lease_until AS bigint),
    started_at = COALESCE(runs.started_at, CAST(:now AS bigint)), next_attempt_at = NULL
  FROM old
  WHERE runs.id = old.id
    AND CASE WHEN old.previous IN ('PENDING', 'RETRYING') AND runs.state = old.previous
                  AND runs.slot <= CAST(:now AS bigint)
                  AND (runs.due_at IS NULL OR runs.due_at <= CAST(:now AS bigint))
                  AND (runs.next_attempt_at IS NULL OR runs.next_attempt_at <= CAST(:now AS bigint))
             THEN true ELSE false END
  RETURNING runs.*, old.previous
), attempted AS (
  INSERT INTO attempts (run_id, number, worker, started_at)
  SELECT id, attempts, :worker, CAST(:now AS bigint) FROM claimed
), evented AS (
  INSERT INTO run_events (run_id, at, state, previous, attempt, node)
  SELECT id, CAST(:now AS bigint), state, previous, attempts, :worker FROM claimed
){noted}
SELECT claimed.*, {job_columns}
FROM claimed LEFT JOIN jobs ON jobs.id = claimed.job_id AND jobs.deleted_at IS NULL
"""


def _claim_statement(noted: str) -> TextualSelect:
    sql = _CLAIM_IN_ONE_SQL.replace(
        "{job_columns}", ", ".join(f"jobs.{name} AS job__{name}" for name in _JOB_COLUMNS)
    ).replace("{noted}", noted)
    columns = (*runs.c, column("previous", String), *(column(f"job__{c.name}", c.type) for c in jobs.c))
    return text(sql).columns(*columns)


_CLAIM_IN_ONE = _claim_statement("")
# A claim that is a whole transaction: job_last_run noted in the same statement (one round trip
# in autocommit, where BEGIN, the claim, the note and COMMIT took four).
_CLAIM_NOTED = _claim_statement(f", last_noted AS ({last_runs.noted_from('claimed')}\n)")


async def _claim_in_one_statement(
    connection: AsyncConnection,
    statement: TextualSelect,
    run_ids: Sequence[str],
    worker: str,
    now: datetime,
    lease_until: datetime,
) -> Claimed:
    require_legal(RunState.PENDING, RunState.RUNNING)  # what the statement's CASE lets through
    require_legal(RunState.RETRYING, RunState.RUNNING)
    params = {"run_ids": list(run_ids), "worker": worker, "now": to_micros(now),
              "lease_until": to_micros(lease_until)}  # fmt: skip
    result = await connection.execute(statement, params)
    return {row["id"]: (codec.run_from_row(row), _joined_job(row)) for row in result.mappings()}


def _joined_job(row: Any) -> Job | None:
    """The job columns of a claimed row (``job__``...), None when the job is deleted."""
    if row["job__id"] is None:
        return None
    return codec.job_from_row({name: row[joined] for name, joined in _JOINED_NAMES})


_JOINED_NAMES = [(name, f"job__{name}") for name in _JOB_COLUMNS]


async def _claim_read_then_write(
    connection: AsyncConnection, run_ids: Sequence[str], worker: str, now: datetime, lease_until: datetime
) -> dict[str, Run]:
    """SQLite: the states read first, then one UPDATE per state they were read in (the UPDATE
    re-checks it), then the attempts and RUNNING events in one statement each."""
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
            .where(checked_per_row(and_(runs.c.state == previous.value, _due(now))))
            .values(**_claimed_values(worker, now, lease_until))
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
    connection: AsyncConnection,
    finishes: Sequence[Finish],
    worker: str,
    now: datetime,
    *,
    noted: bool = False,
) -> dict[str, Run]:
    """Record the outcomes whose lease ``worker`` still holds: each run leaves RUNNING for its
    final state (SUCCESS, RETRYING at its own time, FAILED), its attempt gets the outcome, its
    history an event, and a run that reached SUCCESS or FAILED the notifier's inbox; a job that
    its slot run's success deletes (``delete_after_success``) is deleted in the same transaction
    (:func:`~cronwheel.store.sql.jobs.delete_succeeded`). ``noted``: as for :func:`claim`; on
    PostgreSQL the one statement then commits alone and leaves out (:func:`spared`) the
    successes that delete their job, for the caller to record in a transaction of their own."""
    if flavor_of(connection.dialect).writes_in_with:
        if noted:
            return await _finish_in_one_statement(connection, _FINISH_NOTED, finishes, worker, now)
        recorded = await _finish_in_one_statement(connection, _FINISH_IN_ONE, finishes, worker, now)
    else:
        recorded = await _finish_statement_by_statement(connection, finishes, worker, now)
    await jobs_of.delete_succeeded(connection, recorded.values(), now)
    if noted:
        await last_runs.record_found(connection, recorded)
    return recorded


def spared(finishes: Sequence[Finish], recorded: Mapping[str, Run]) -> list[Finish]:
    """The successes of ``finishes`` that a write committing alone did not record: those that may
    delete their job (and those whose lease was lost, which a second write refuses again)."""
    return [one for one in finishes if one.result.outcome is Outcome.SUCCESS and one.run_id not in recorded]


# PostgreSQL: the outcomes as one array per column, joined by primary key (and attempt number)
# with the runs whose lease ``worker`` holds; the attempts, events and inbox rows are written from
# what that UPDATE returns, in the same statement. The text never changes: planned once.
_FINISH_IN_ONE_SQL = """
WITH outcome AS (
  SELECT * FROM unnest(CAST(:run_ids AS varchar[]), CAST(:attempts AS integer[]),
    CAST(:states AS varchar[]), CAST(:next_attempt_at AS bigint[]), CAST(:outcomes AS varchar[]),
    CAST(:status_codes AS integer[]), CAST(:exit_codes AS integer[]), CAST(:errors AS text[]),
    CAST(:outputs AS text[]), CAST(:retry_after_s AS float8[]), CAST(:output_tails AS text[]),
    CAST(:request_headers AS text[]), CAST(:response_headers AS text[]), CAST(:details AS text[]))
    AS o(run_id, attempt, state, next_attempt_at, outcome, status_code, exit_code, error, output,
         retry_after_s, output_tail, request_headers, response_headers, detail)
), finished AS (
  UPDATE runs SET state = o.state, lease_owner = NULL, lease_expires_at = NULL,
    next_attempt_at = o.next_attempt_at,
    finished_at = CASE WHEN o.state = 'RETRYING' THEN NULL ELSE CAST(:now AS bigint) END
  FROM outcome AS o
  WHERE runs.id = o.run_id AND runs.attempts = o.attempt
    AND CASE WHEN runs.state = 'RUNNING' AND runs.lease_owner = :worker{spare} THEN true ELSE false END
  RETURNING runs.*
), attempted AS (
  UPDATE attempts SET finished_at = CAST(:now AS bigint), outcome = o.outcome,
    status_code = o.status_code, exit_code = o.exit_code, error = o.error, output = o.output,
    retry_after_s = o.retry_after_s, output_tail = o.output_tail,
    request_headers = CAST(o.request_headers AS json), output_at = NULL,
    response_headers = CAST(o.response_headers AS json)
  FROM outcome AS o JOIN finished AS f ON f.id = o.run_id
  WHERE attempts.run_id = o.run_id AND attempts.number = o.attempt
), evented AS (
  INSERT INTO run_events (run_id, at, state, previous, attempt, node, detail)
  SELECT f.id, CAST(:now AS bigint), f.state, 'RUNNING', f.attempts, :worker, o.detail
  FROM finished AS f JOIN outcome AS o ON o.run_id = f.id
), noted AS (
  INSERT INTO notification_inbox (run_id, at)
  SELECT f.id, CAST(:now AS bigint) FROM finished AS f WHERE f.state IN ('SUCCESS', 'FAILED')
){noted}
SELECT * FROM finished
"""
_FINISH_IN_ONE = text(_FINISH_IN_ONE_SQL.replace("{noted}", "").replace("{spare}", "")).columns(*runs.c)
# A success that deletes its job (a slot run of a live job with delete_after_success) is left
# out of a statement that commits alone: the deletion (jobs.delete_succeeded: the job, its armed
# runs, its audit entry) takes statements of its own, in the transaction that records the success.
SPARED_SQL = f"""
      AND NOT (o.state = 'SUCCESS' AND runs.kind <> '{RunKind.MANUAL.value}' AND EXISTS (
        SELECT 1 FROM jobs WHERE jobs.id = runs.job_id AND jobs.delete_after_success
          AND jobs.deleted_at IS NULL))"""  # noqa: S608 (constants only)
# outcomes that are a whole transaction: job_last_run noted in the same statement (autocommit)
_NOTED = f", last_noted AS ({last_runs.noted_from('finished')}\n)"
_FINISH_NOTED_SQL = _FINISH_IN_ONE_SQL.replace("{noted}", _NOTED).replace("{spare}", SPARED_SQL)
_FINISH_NOTED = text(_FINISH_NOTED_SQL).columns(*runs.c)


async def _finish_in_one_statement(
    connection: AsyncConnection,
    statement: TextualSelect,
    finishes: Sequence[Finish],
    worker: str,
    now: datetime,
) -> dict[str, Run]:
    results = [one.result for one in finishes]
    states = [finished_state(one) for one in finishes]
    params = {
        "run_ids": [one.run_id for one in finishes],
        "attempts": [one.attempt for one in finishes],
        "states": [state.value for state in states],
        "next_attempt_at": [retry_micros(one, state) for one, state in zip(finishes, states, strict=True)],
        "outcomes": [result.outcome.value for result in results],
        "status_codes": [result.status_code for result in results],
        "exit_codes": [result.exit_code for result in results],
        "errors": [result.error for result in results],
        "outputs": [result.output for result in results],
        "retry_after_s": [result.retry_after_s for result in results],
        "output_tails": [result.output_tail for result in results],
        "request_headers": [headers_text(result.request_headers) for result in results],
        "response_headers": [headers_text(result.response_headers) for result in results],
        "details": [outcome_detail(result) for result in results],
        "now": to_micros(now),
        "worker": worker,
    }  # fmt: skip
    result = await connection.execute(statement, params)
    return {row["id"]: codec.run_from_row(row) for row in result.mappings()}


def retry_micros(one: Finish, state: RunState) -> int | None:
    """When the next attempt is due: set only on a run that goes RETRYING."""
    if state is not RunState.RETRYING or one.next_attempt_at is None:
        return None
    return to_micros(one.next_attempt_at)


def headers_text(headers_kept: tuple[tuple[str, str], ...] | None) -> str | None:
    headers = codec.headers_to_json(headers_kept)
    return None if headers is None else json.dumps(headers)


async def _finish_statement_by_statement(
    connection: AsyncConnection, finishes: Sequence[Finish], worker: str, now: datetime
) -> dict[str, Run]:
    """SQLite: one UPDATE of the runs per final state (a retry's own time each), one
    executemany for the attempts, one insert of events (and inbox rows)."""
    groups: dict[tuple[RunState, datetime | None], list[Finish]] = {}
    for one in finishes:
        state = finished_state(one)
        key = (state, one.next_attempt_at if state is RunState.RETRYING else None)
        groups.setdefault(key, []).append(one)
    recorded: dict[str, Run] = {}
    running_here = and_(runs.c.state == RunState.RUNNING.value, runs.c.lease_owner == worker)
    for (state, next_at), group in groups.items():
        held = runs_listed(connection, [f.run_id for f in group], [f.attempt for f in group])
        result = await connection.execute(
            update(runs)
            .where(held)
            .where(checked_per_row(running_here))
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
                              outcome_detail(f.result))
            for f in done
        ]  # fmt: skip
        await bulk.insert_events(connection, events)
    return recorded


def finished_state(one: Finish) -> RunState:
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
        output_at=None,
        response_headers=bindparam("b_response_headers", type_=attempts.c.response_headers.type),
    )
)


def _attempt_outcome(one: Finish, now: datetime) -> dict[str, Any]:
    result = one.result
    return {"b_run_id": one.run_id, "b_number": one.attempt, "b_finished_at": now,
            "b_outcome": result.outcome.value, "b_status_code": result.status_code,
            "b_exit_code": result.exit_code, "b_error": result.error, "b_output": result.output,
            "b_retry_after_s": result.retry_after_s, "b_output_tail": result.output_tail,
            "b_request_headers": codec.headers_to_json(result.request_headers),
            "b_response_headers": codec.headers_to_json(result.response_headers)}  # fmt: skip


def outcome_detail(result: AttemptResult) -> str:
    detail = result.outcome.value if result.error is None else f"{result.outcome}: {result.error}"
    return detail[:DETAIL_MAX]


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

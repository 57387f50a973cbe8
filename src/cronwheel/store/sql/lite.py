"""SQLite: a worker's claim batch and outcome batch, each a whole write transaction in one trip to
the driver's thread.

PostgreSQL does each in one statement (:mod:`cronwheel.store.sql.leases`). SQLite has no
data-modifying ``WITH``, so each takes several statements, and through SQLAlchemy every one of
them pays, on the event loop's thread, for its compiled form, its parameters and its rows, and
for the greenlet switches around its trip to aiosqlite's thread: a third of the embedded
worker's CPU (docs/performance.md). Here the statements run as one function on that thread
(:func:`~cronwheel.store.sqlite_cursor.write_transaction`), with texts that never change (a batch
is one JSON array, read by ``json_each``), so ``sqlite3`` prepares each once per connection. The
rows come back raw and are read through the columns' own SQLAlchemy types, as any read of the
store reads them.

What they write is what :func:`~cronwheel.store.sql.leases.claim` and
:func:`~cronwheel.store.sql.leases.finish` write elsewhere: the same runs, attempts, events,
notifier inbox rows and ``job_last_run`` notes, in one transaction; the store's contract suite
runs over this path on SQLite.
"""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Table
from sqlalchemy.engine import Dialect

from cronwheel.model import Job, Run, RunState
from cronwheel.store import codec
from cronwheel.store.port import Finish
from cronwheel.store.schema import jobs, runs, to_micros
from cronwheel.store.sql import bulk, last_runs, leases
from cronwheel.store.sql.tx import Transactions
from cronwheel.store.sql.where import CLAIMABLE_VALUES, require_legal

_RUN_COLUMNS = ", ".join(c.name for c in runs.c)
_ID, _JOB_ID, _SLOT, _STATE, _ATTEMPTS = (runs.c.keys().index(name) for name in
                                          ("id", "job_id", "slot", "state", "attempts"))  # fmt: skip
_CLAIMABLE = ", ".join(f"'{state}'" for state in CLAIMABLE_VALUES)
_LISTED = "id IN (SELECT value FROM json_each(:ids))"
# Every run is found by primary key: the unary ``+`` keeps SQLite from answering the other
# conditions by an index (with ``state`` it scanned every PENDING run of a herd).
_DUE = (
    f"+state IN ({_CLAIMABLE}) AND +slot <= :now AND (+next_attempt_at IS NULL OR +next_attempt_at <= :now)"
)

# The claimable runs of a batch, with the state each is claimed from (its RUNNING event's
# ``previous``), then the claim itself, which re-checks the same conditions.
_CLAIMABLE_SQL = f"SELECT id, state FROM runs WHERE {_LISTED} AND {_DUE}"  # noqa: S608 (constants)
_CLAIM_SQL = f"""
UPDATE runs SET state = 'RUNNING', attempts = attempts + 1, lease_owner = :worker,
  lease_expires_at = :lease_until, started_at = COALESCE(started_at, :now), next_attempt_at = NULL
WHERE {_LISTED} AND {_DUE}
RETURNING {_RUN_COLUMNS}
"""  # noqa: S608 (constants only)
_ATTEMPT_SQL = "INSERT INTO attempts (run_id, number, worker, started_at) VALUES (?, ?, ?, ?)"
_JOBS_SQL = f"""
SELECT {", ".join(c.name for c in jobs.c)} FROM jobs WHERE {_LISTED} AND +deleted_at IS NULL
"""  # noqa: S608 (constants only)

# Each outcome is [run id, attempt, final state, next attempt (epoch microseconds) or null].
_FINISH_SQL = f"""
UPDATE runs SET state = json_extract(o.value, '$[2]'), lease_owner = NULL, lease_expires_at = NULL,
  next_attempt_at = json_extract(o.value, '$[3]'),
  finished_at = CASE WHEN json_extract(o.value, '$[2]') = 'RETRYING' THEN NULL ELSE :now END
FROM json_each(:outcomes) AS o
WHERE runs.id = json_extract(o.value, '$[0]') AND runs.attempts = json_extract(o.value, '$[1]')
  AND +runs.state = 'RUNNING' AND +runs.lease_owner = :worker
RETURNING {_RUN_COLUMNS}
"""  # noqa: S608 (constants only)
_ATTEMPT_OUTCOME_SQL = """
UPDATE attempts SET finished_at = ?, outcome = ?, status_code = ?, exit_code = ?, error = ?,
  output = ?, retry_after_s = ?, output_tail = ?, request_headers = ?
WHERE run_id = ? AND number = ?
"""

Claimed = dict[str, tuple[Run, Job | None]]


async def claim(
    tx: Transactions, run_ids: Sequence[str], worker: str, now: datetime, lease_until: datetime
) -> Claimed:
    """:func:`~cronwheel.store.sql.leases.claim` of ``run_ids`` as one write transaction."""
    for previous in CLAIMABLE_VALUES:
        require_legal(RunState(previous), RunState.RUNNING)
    params = {"ids": json.dumps(list(run_ids)), "worker": worker, "now": to_micros(now),
              "lease_until": to_micros(lease_until)}  # fmt: skip
    claimed, found = await tx.write_on_driver(lambda cursor: _claim(cursor, params))
    read = _reader(tx.engine.dialect)
    live = {job.id: job for job in map(read.job, found)}
    return {row[_ID]: (read.run(row), live.get(row[_JOB_ID])) for row in claimed}


def _claim(cursor: sqlite3.Cursor, params: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    """On the driver's thread: the claimed runs' rows and their live jobs' rows."""
    previous = dict(cursor.execute(_CLAIMABLE_SQL, params).fetchall())
    if not previous:
        return [], []
    claimed = cursor.execute(_CLAIM_SQL, params).fetchall()
    now, worker = params["now"], params["worker"]
    cursor.executemany(_ATTEMPT_SQL, [(row[_ID], row[_ATTEMPTS], worker, now) for row in claimed])
    events = [(row[_ID], now, row[_STATE], previous[row[_ID]], row[_ATTEMPTS], worker, None)
              for row in claimed]  # fmt: skip
    bulk.insert_events_on(cursor, events)
    job_ids = json.dumps(sorted({row[_JOB_ID] for row in claimed}))
    found = cursor.execute(_JOBS_SQL, {"ids": job_ids}).fetchall()
    last_runs.record_on(cursor, [(row[_JOB_ID], row[_SLOT], row[_ID], row[_STATE]) for row in claimed])
    return claimed, found


async def finish(tx: Transactions, finishes: Sequence[Finish], worker: str, now: datetime) -> dict[str, Run]:
    """:func:`~cronwheel.store.sql.leases.finish` of ``finishes`` (each run named once) as one
    write transaction."""
    micros = to_micros(now)
    states = [leases.finished_state(one) for one in finishes]
    outcomes = [[one.run_id, one.attempt, state.value, leases.retry_micros(one, state)]
                for one, state in zip(finishes, states, strict=True)]  # fmt: skip
    params = {"outcomes": json.dumps(outcomes), "now": micros, "worker": worker}
    recorded = [_attempt_outcome(one, micros) for one in finishes]
    events = [(one.run_id, micros, state.value, RunState.RUNNING.value, one.attempt, worker,
               leases.outcome_detail(one.result))
              for one, state in zip(finishes, states, strict=True)]  # fmt: skip
    finished = await tx.write_on_driver(lambda cursor: _finish(cursor, params, recorded, events))
    read = _reader(tx.engine.dialect)
    return {row[_ID]: read.run(row) for row in finished}


Values = list[tuple[Any, ...]]


def _finish(cursor: sqlite3.Cursor, params: dict[str, Any], recorded: Values, events: Values) -> list[Any]:
    """On the driver's thread: the finished runs' rows (those whose lease ``worker`` held)."""
    finished = cursor.execute(_FINISH_SQL, params).fetchall()
    if not finished:
        return []
    done = {row[_ID] for row in finished}
    cursor.executemany(_ATTEMPT_OUTCOME_SQL, [values for values in recorded if values[-2] in done])
    bulk.insert_events_on(cursor, [event for event in events if event[0] in done])
    last_runs.record_on(cursor, [(row[_JOB_ID], row[_SLOT], row[_ID], row[_STATE]) for row in finished])
    return finished


def _attempt_outcome(one: Finish, micros: int) -> tuple[Any, ...]:
    """The values of :data:`_ATTEMPT_OUTCOME_SQL` for one outcome (its keys last)."""
    result = one.result
    return (micros, result.outcome.value, result.status_code, result.exit_code, result.error,
            result.output, result.retry_after_s, result.output_tail, leases.headers_text(result),
            one.run_id, one.attempt)  # fmt: skip


class _Reader:
    """Raw rows of ``runs`` and ``jobs`` as records, each value read through its column's type
    (the dialect's result processors: instants, JSON, booleans), as SQLAlchemy reads them."""

    def __init__(self, dialect: Dialect) -> None:
        self._runs = _columns(runs, dialect)
        self._jobs = _columns(jobs, dialect)

    def run(self, row: Sequence[Any]) -> Run:
        return codec.run_from_row(_mapping(self._runs, row))

    def job(self, row: Sequence[Any]) -> Job:
        return codec.job_from_row(_mapping(self._jobs, row))


_Columns = tuple[list[str], list[tuple[int, Any]]]  # names, and (index, processor) where one applies


def _columns(table: Table, dialect: Dialect) -> _Columns:
    processors = [(index, column.type.dialect_impl(dialect).result_processor(dialect, None))
                  for index, column in enumerate(table.c)]  # fmt: skip
    return [c.name for c in table.c], [(index, p) for index, p in processors if p is not None]


def _mapping(columns: _Columns, row: Sequence[Any]) -> dict[str, Any]:
    names, processors = columns
    values = list(row)
    for index, processor in processors:
        values[index] = processor(values[index])
    return dict(zip(names, values, strict=True))


@functools.cache
def _reader(dialect: Dialect) -> _Reader:
    return _Reader(dialect)

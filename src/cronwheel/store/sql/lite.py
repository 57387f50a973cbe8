"""SQLite: a worker's claim batch and outcome batch, each a whole write transaction in one trip to
the driver's thread, of a few set-based statements.

PostgreSQL does each in one statement (:mod:`cronwheel.store.sql.leases`). SQLite has no
data-modifying ``WITH``, so each takes several statements, and through SQLAlchemy every one of
them pays, on the event loop's thread, for its compiled form, its parameters and its rows, and
for the greenlet switches around its trip to aiosqlite's thread. Here the statements run as one
function on that thread (:func:`~cronwheel.store.sqlite_cursor.write_transaction`), and each
handles the whole batch at once: the batch goes in as one JSON array (read by ``json_each``), the
rows come back as one JSON array (``json_group_array``). ``sqlite3`` releases the GIL around each
step of a statement and must take it back after: a statement that steps once per row hands the
GIL to the event loop and waits for it (up to the 5 ms switch interval) once per row, and a
batch of 128 runs made hundreds of such waits. Set-based, a batch is about ten steps, whatever
its size. The texts never change, so ``sqlite3`` prepares each once per connection.

The rows are read through the columns' own SQLAlchemy types, as any read of the store reads
them. What is written is what :func:`~cronwheel.store.sql.leases.claim` and
:func:`~cronwheel.store.sql.leases.finish` write elsewhere (the runs, attempts, events, notifier
inbox rows and ``job_last_run`` notes, in one transaction); ``tests/store/test_lite.py`` compares
the two, and the store's contract suite runs over this path on SQLite.
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

from cronwheel.errors import InvalidInputError
from cronwheel.model import Finish, Job, Run, RunKind, RunState
from cronwheel.store import codec
from cronwheel.store.driver import REFUSED_VALUE
from cronwheel.store.schema import Instant, jobs, runs, to_micros
from cronwheel.store.sql import bulk, last_runs, leases
from cronwheel.store.sql.tx import Transactions
from cronwheel.store.sql.where import CLAIMABLE_VALUES, require_legal


def _quoted(values: Sequence[str]) -> str:
    return ", ".join(f"'{value}'" for value in values)


def _as_json(table: Table, where: str) -> str:
    """One row, one column: the rows of ``table`` that ``where`` finds, as a JSON array of arrays
    in the table's column order."""
    columns = ", ".join(column.name for column in table.c)
    return f"SELECT json_group_array(json_array({columns})) FROM {table.name} WHERE {where}"  # noqa: S608


def _at(index: int) -> str:
    return f"json_extract(o.value, '$[{index}]')"


_LISTED = "id IN (SELECT value FROM json_each(:ids))"  # :ids, a JSON array of run ids
# Every run is found by primary key: the unary ``+`` keeps SQLite from answering the other
# conditions by an index (with ``state`` it read every PENDING run of a herd).
_DUE = (
    f"+state IN ({_quoted(CLAIMABLE_VALUES)}) AND +slot <= :now AND (+due_at IS NULL OR +due_at <= :now)"
    " AND (+next_attempt_at IS NULL OR +next_attempt_at <= :now)"
)

# -- a claim ---------------------------------------------------------------------------------------
# The claimable runs of the batch as [[id, state], ...]; then, with :ids those runs (the transaction
# is the database's one writer since BEGIN IMMEDIATE: what it read stands), the claim, the attempts,
# the RUNNING events (``previous``: the state read), the job_last_run notes, and what to return.
_CLAIMABLE_SQL = f"SELECT json_group_array(json_array(id, state)) FROM runs WHERE {_LISTED} AND {_DUE}"  # noqa: S608
_CLAIM_SQL = f"""
UPDATE runs SET state = 'RUNNING', attempts = attempts + 1, lease_owner = :worker,
  lease_expires_at = :lease_until, started_at = COALESCE(started_at, :now), next_attempt_at = NULL
WHERE {_LISTED}
"""  # noqa: S608 (constants only)
_CLAIM_ATTEMPTS_SQL = f"""
INSERT INTO attempts (run_id, number, worker, started_at)
SELECT id, attempts, :worker, :now FROM runs WHERE {_LISTED}
"""  # noqa: S608 (constants only)
_CLAIM_EVENTS_SQL = f"""
INSERT INTO run_events (run_id, at, state, previous, attempt, node)
SELECT runs.id, :now, runs.state, {_at(1)}, runs.attempts, :worker
FROM json_each(:previous) AS o JOIN runs ON runs.id = {_at(0)}
"""  # noqa: S608 (constants only)
_NOTED_SQL = last_runs.noted_from_select(f"SELECT job_id, slot, id, state FROM runs WHERE {_LISTED}")  # noqa: S608
_RUNS_SQL = _as_json(runs, _LISTED)  # the runs of :ids, as they are now
_CLAIMED_JOBS_SQL = _as_json(jobs, f"id IN (SELECT job_id FROM runs WHERE {_LISTED}) AND +deleted_at IS NULL")  # noqa: S608

# -- an outcome batch ------------------------------------------------------------------------------
# :outcomes, one array per outcome: the fields of _OUTCOME below, in that order.
_OUTCOME = ("run_id", "attempt", "state", "next_attempt_at", "outcome", "status_code", "exit_code",
            "error", "output", "retry_after_s", "output_tail", "request_headers",
            "response_headers", "detail")  # fmt: skip
_O = {name: _at(index) for index, name in enumerate(_OUTCOME)}
# The runs whose lease :worker holds, at the attempt of the outcome, as [id, ...], but for the
# successes that delete their job (leases.SPARED_SQL says why; SqlStore records them apart); then,
# with :ids those runs, the runs, their attempts, events, inbox rows and job_last_run notes, and
# what to return.
_HELD_SQL = f"""
SELECT json_group_array(runs.id) FROM json_each(:outcomes) AS o JOIN runs ON runs.id = {_O["run_id"]}
WHERE +runs.attempts = {_O["attempt"]} AND +runs.state = 'RUNNING' AND +runs.lease_owner = :worker
  AND NOT ({_O["state"]} = 'SUCCESS' AND +runs.kind <> '{RunKind.MANUAL.value}' AND EXISTS (
    SELECT 1 FROM jobs WHERE jobs.id = runs.job_id AND +jobs.delete_after_success
      AND +jobs.deleted_at IS NULL))
"""  # noqa: S608 (constants only)
_HELD = f"{_O['run_id']} IN (SELECT value FROM json_each(:ids))"  # noqa: S608 (constants only)
_FINISH_SQL = f"""
UPDATE runs SET state = {_O["state"]}, lease_owner = NULL, lease_expires_at = NULL,
  next_attempt_at = {_O["next_attempt_at"]},
  finished_at = CASE WHEN {_O["state"]} = 'RETRYING' THEN NULL ELSE :now END
FROM json_each(:outcomes) AS o
WHERE runs.id = {_O["run_id"]} AND {_HELD}
"""  # noqa: S608 (constants only)
_FINISH_ATTEMPTS_SQL = f"""
UPDATE attempts SET finished_at = :now, outcome = {_O["outcome"]}, status_code = {_O["status_code"]},
  exit_code = {_O["exit_code"]}, error = {_O["error"]}, output = {_O["output"]},
  retry_after_s = {_O["retry_after_s"]}, output_tail = {_O["output_tail"]},
  request_headers = {_O["request_headers"]}, output_at = NULL,
  response_headers = {_O["response_headers"]}
FROM json_each(:outcomes) AS o
WHERE attempts.run_id = {_O["run_id"]} AND attempts.number = {_O["attempt"]} AND {_HELD}
"""  # noqa: S608 (constants only)
_FINISH_EVENTS_SQL = f"""
INSERT INTO run_events (run_id, at, state, previous, attempt, node, detail)
SELECT {_O["run_id"]}, :now, {_O["state"]}, 'RUNNING', {_O["attempt"]}, :worker, {_O["detail"]}
FROM json_each(:outcomes) AS o WHERE {_HELD}
"""  # noqa: S608 (constants only)
_INBOX_SQL = f"""
INSERT INTO notification_inbox (run_id, at)
SELECT {_O["run_id"]}, :now FROM json_each(:outcomes) AS o
WHERE {_HELD} AND {_O["state"]} IN ({_quoted(bulk.NOTIFIED)})
"""  # noqa: S608 (constants only)


async def claim(
    tx: Transactions, run_ids: Sequence[str], worker: str, now: datetime, lease_until: datetime
) -> leases.Claimed:
    """:func:`~cronwheel.store.sql.leases.claim` of ``run_ids`` as one write transaction."""
    for previous in CLAIMABLE_VALUES:
        require_legal(RunState(previous), RunState.RUNNING)
    params = {"ids": json.dumps(list(run_ids)), "worker": worker, "now": to_micros(now),
              "lease_until": to_micros(lease_until)}  # fmt: skip
    claimed, found = await tx.write_on_driver(lambda cursor: _claim(cursor, params))
    read = _reader(tx.engine.dialect)
    live = {job.id: job for job in map(read.job, json.loads(found))}
    return {run.id: (run, live.get(run.job_id)) for run in map(read.run, json.loads(claimed))}


def _claim(cursor: sqlite3.Cursor, params: dict[str, Any]) -> tuple[str, str]:
    """On the driver's thread: the claimed runs' rows and their live jobs' rows, as JSON."""
    (previous,) = cursor.execute(_CLAIMABLE_SQL, params).fetchone()
    if previous == "[]":
        return "[]", "[]"
    params = {**params, "previous": previous, "ids": _first_of_each(previous)}
    for statement in (_CLAIM_SQL, _CLAIM_ATTEMPTS_SQL, _CLAIM_EVENTS_SQL, _NOTED_SQL):
        cursor.execute(statement, params)
    (claimed,) = cursor.execute(_RUNS_SQL, params).fetchone()
    (found,) = cursor.execute(_CLAIMED_JOBS_SQL, params).fetchone()
    return claimed, found


def _first_of_each(pairs: str) -> str:
    """``[[id, ...], ...]`` -> ``[id, ...]``, as JSON."""
    return json.dumps([pair[0] for pair in json.loads(pairs)])


async def finish(tx: Transactions, finishes: Sequence[Finish], worker: str, now: datetime) -> dict[str, Run]:
    """:func:`~cronwheel.store.sql.leases.finish` of ``finishes`` (each run named once) as one
    write transaction."""
    outcomes = [_outcome(one) for one in finishes]
    # SQLite's JSON functions end a text at NUL: refused, as PostgreSQL refuses NUL in text
    if any(isinstance(value, str) and "\x00" in value for outcome in outcomes for value in outcome):
        raise InvalidInputError(REFUSED_VALUE)
    # ensure_ascii off: a text that cannot be stored (a lone surrogate) fails to bind, as it does
    # through SQLAlchemy (InvalidInputError), rather than being stored as an escape
    params = {"outcomes": json.dumps(outcomes, ensure_ascii=False), "now": to_micros(now), "worker": worker}
    finished = await tx.write_on_driver(lambda cursor: _finish(cursor, params))
    read = _reader(tx.engine.dialect)
    return {run.id: run for run in map(read.run, json.loads(finished))}


def _finish(cursor: sqlite3.Cursor, params: dict[str, Any]) -> str:
    """On the driver's thread: the finished runs' rows (those whose lease ``worker`` held), as JSON."""
    (held,) = cursor.execute(_HELD_SQL, params).fetchone()
    if held == "[]":
        return "[]"
    params = {**params, "ids": held}
    for statement in (_FINISH_SQL, _FINISH_ATTEMPTS_SQL, _FINISH_EVENTS_SQL, _INBOX_SQL, _NOTED_SQL):
        cursor.execute(statement, params)
    (finished,) = cursor.execute(_RUNS_SQL, params).fetchone()
    return str(finished)


def _outcome(one: Finish) -> list[Any]:
    """The values of one outcome, in :data:`_OUTCOME` order."""
    state = leases.finished_state(one)
    result = one.result
    return [one.run_id, one.attempt, state.value, leases.retry_micros(one, state), result.outcome.value,
            result.status_code, result.exit_code, result.error, result.output, result.retry_after_s,
            result.output_tail, leases.headers_text(result.request_headers),
            leases.headers_text(result.response_headers), leases.outcome_detail(result)]  # fmt: skip


class _Reader:
    """Rows of ``runs`` and ``jobs`` (arrays in column order) as records, each value read through
    its column's type (the dialect's result processors: instants, JSON, booleans), as SQLAlchemy
    reads them."""

    def __init__(self, dialect: Dialect) -> None:
        self._runs = _columns(runs, dialect)
        self._jobs = _columns(jobs, dialect)

    def run(self, row: Sequence[Any]) -> Run:
        return codec.run_from_row(_mapping(self._runs, row))

    def job(self, row: Sequence[Any]) -> Job:
        return codec.job_from_row(_mapping(self._jobs, row))


_Columns = tuple[list[str], list[tuple[int, Any]]]  # names, and (index, processor) where one applies
# The JSON columns whose value only goes into immutable records (policies, target, labels): the
# same text (most jobs share their policies) is decoded once. ``payload`` is handed on as it is.
_RECORDS = frozenset({"target", "retry", "misfire", "labels", "retention"})


def _columns(table: Table, dialect: Dialect) -> _Columns:
    processors = []
    for index, column in enumerate(table.c):
        processor = column.type.dialect_impl(dialect).result_processor(dialect, None)
        if processor is not None and (isinstance(column.type, Instant) or column.name in _RECORDS):
            processor = functools.lru_cache(maxsize=4096)(processor)  # a herd shares its instants
        if processor is not None:
            processors.append((index, processor))
    return [c.name for c in table.c], processors


def _mapping(columns: _Columns, row: Sequence[Any]) -> dict[str, Any]:
    names, processors = columns
    values = list(row)
    for index, processor in processors:
        values[index] = processor(values[index])
    return dict(zip(names, values, strict=True))


@functools.cache
def _reader(dialect: Dialect) -> _Reader:
    return _Reader(dialect)

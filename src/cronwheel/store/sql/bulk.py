"""The fire path's bulk writes: runs and their first events inserted, job cursors advanced.

These run once per fire batch (thousands of rows), so they skip SQLAlchemy's per-value
processing: the values are converted once here (instants to epoch microseconds, enums to their
text, payloads to JSON text) and sent as plain driver parameters. Measured with
``benchmarks/bench_fire.py``: SQLAlchemy's executemany with RETURNING spent most of a fire's
cost binding values through the ``Instant`` type and rebuilding ``Run`` records from the
returned rows; here the caller's own records are returned. Statement texts are built from
this module's constants and row counts only; every value is a bound parameter.

* PostgreSQL: one statement per batch, whatever its size, with one array per column
  (``unnest``), joined by primary key where it updates. The statement text never changes, so
  each connection plans it once.
* SQLite: multi-row ``VALUES`` of at most :data:`SQLITE_ROWS` rows, the statement text cached
  per row count (SQLite parses it in microseconds; the variable limit is 32,766).

Semantics are those of the SQLAlchemy statements they replace: ``INSERT ... ON CONFLICT DO
NOTHING RETURNING id`` (an existing run, by id or by job and dedup key, is left alone and not
returned) and the conditional cursor ``UPDATE ... RETURNING id``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import operator
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from cronwheel.errors import InvalidInputError
from cronwheel.model import Firing, Run, RunState, shard_of
from cronwheel.store.driver import flavor_of
from cronwheel.store.schema import metadata, to_micros

SQLITE_ROWS = 500  # rows per SQLite statement (24 columns: 12,000 variables of the 32,766 allowed)

# The columns of ``runs`` a new run writes, with their PostgreSQL array types.
_RUN_COLUMNS = (
    ("id", "varchar"),
    ("job_id", "varchar"),
    ("kind", "varchar"),
    ("slot", "bigint"),
    ("dedup_key", "varchar"),
    ("state", "varchar"),
    ("queue", "varchar"),
    ("job_version", "integer"),
    ("reason", "text"),
    ("payload", "json"),
    ("has_payload", "boolean"),
    ("attempts", "integer"),
    ("lost_attempts", "integer"),
    ("idempotency_key", "varchar"),
    ("created_at", "bigint"),
    ("queued_at", "bigint"),
    ("started_at", "bigint"),
    ("finished_at", "bigint"),
    ("next_attempt_at", "bigint"),
    ("lease_owner", "varchar"),
    ("lease_expires_at", "bigint"),
    ("cancel_requested", "boolean"),
    ("epoch", "bigint"),
    ("traceparent", "varchar"),
    ("due_at", "bigint"),
)
_EVENT_COLUMNS = (
    ("run_id", "varchar"),
    ("at", "bigint"),
    ("state", "varchar"),
    ("previous", "varchar"),
    ("attempt", "integer"),
    ("node", "varchar"),
    ("detail", "text"),
)

# The nullable columns of each table written here (from the schema: one definition).
_NULLABLE = {
    name: frozenset(column.name for column in metadata.tables[name].columns if column.nullable)
    for name in ("runs", "run_events")
}


def _micros(moment: datetime | None) -> int | None:
    return None if moment is None else to_micros(moment)


@contextlib.contextmanager
def _converting() -> Iterator[None]:
    """A value that cannot be stored (a naive datetime) is the caller's error, as it is when
    SQLAlchemy binds it: nothing of the transaction is written."""
    try:
        yield
    except (TypeError, ValueError) as error:
        raise InvalidInputError(str(error)) from error


def _run_values(run: Run, epoch: int | None) -> tuple[Any, ...]:
    """One run as the values of :data:`_RUN_COLUMNS`, in order (``created_at`` already set)."""
    payload = None if run.payload is None else json.dumps(run.payload)
    return (
        run.id, run.job_id, run.kind.value, to_micros(run.slot), run.dedup_key, run.state.value,
        run.queue, run.job_version, run.reason, payload, run.has_payload, run.attempts, 0,
        run.idempotency_key, _micros(run.created_at), _micros(run.queued_at), _micros(run.started_at),
        _micros(run.finished_at), _micros(run.next_attempt_at), run.lease_owner,
        _micros(run.lease_expires_at), run.cancel_requested, epoch, run.traceparent, _micros(run.due_at),
    )  # fmt: skip


async def insert_runs(
    connection: AsyncConnection,
    new_runs: Sequence[Run],
    now: datetime,
    epochs: Mapping[int, int] | None = None,
) -> list[Run]:
    """Insert the runs that do not exist yet (by id, or by job and dedup key), each with its
    first history event (its state at ``now``, its reason as detail). A run without
    ``created_at`` gets ``now``; ``epochs`` stamps each run with its shard's fencing epoch.
    Returns the inserted runs, in order."""
    if not new_runs:
        return []
    records = [run if run.created_at is not None else replace(run, created_at=now) for run in new_runs]
    with _converting():
        at = to_micros(now)
        if epochs is None:
            rows = [_run_values(run, None) for run in records]
        else:
            rows = [_run_values(run, epochs.get(shard_of(run.job_id))) for run in records]
    inserted_ids = await _insert_returning_ids(connection, "runs", _RUN_COLUMNS, rows)
    inserted = [run for run in records if run.id in inserted_ids]
    events = [(run.id, at, run.state.value, None, 0, None, run.reason) for run in inserted]
    await insert_events(connection, events)
    return inserted


def event_values(
    run_id: str,
    at: datetime,
    state: RunState,
    previous: RunState | None = None,
    attempt: int = 0,
    node: str | None = None,
    detail: str | None = None,
) -> tuple[Any, ...]:
    """One history event as the values :func:`insert_events` takes."""
    with _converting():
        micros = to_micros(at)
    return (run_id, micros, state.value, None if previous is None else previous.value, attempt, node, detail)


async def insert_events(connection: AsyncConnection, rows: Sequence[tuple[Any, ...]]) -> None:
    """Append history events given as :func:`event_values` tuples; the runs that reached SUCCESS
    or FAILED also go to the notifier's inbox, in the same transaction (:func:`note_outcomes`)."""
    if not rows:
        return
    await note_outcomes(connection, rows)
    columns, rows = _filled("run_events", _EVENT_COLUMNS, rows)
    if flavor_of(connection.dialect).arrays:
        await connection.execute(_unnest_insert("run_events", columns, returning=False), _arrays(rows))
        return
    await connection.exec_driver_sql(_sqlite_append("run_events", columns), list(rows))


def _filled(
    table: str, columns: tuple[tuple[str, str], ...], rows: Sequence[tuple[Any, ...]]
) -> tuple[tuple[tuple[str, str], ...], Sequence[tuple[Any, ...]]]:
    """The columns worth sending, and ``rows`` cut to them: a nullable column that is NULL in
    every row is left out (the database stores NULL for it). A batch of new scheduled runs then
    binds 13 values a run instead of 24, and its first events 4 instead of 7 (binding every NULL
    was a sixth of SQLite's share of a fire: ``bind_parameters`` in a py-spy profile)."""
    nullable = _NULLABLE[table]
    keep = tuple(
        index
        for index, (name, _) in enumerate(columns)
        if name not in nullable or any(row[index] is not None for row in rows)
    )
    if len(keep) == len(columns):
        return columns, rows
    pick = operator.itemgetter(*keep)
    return tuple(columns[index] for index in keep), [_as_tuple(pick(row)) for row in rows]


def _as_tuple(picked: Any) -> tuple[Any, ...]:
    return picked if isinstance(picked, tuple) else (picked,)  # itemgetter of one index: a value


async def _insert_returning_ids(
    connection: AsyncConnection,
    table: str,
    columns: tuple[tuple[str, str], ...],
    rows: Sequence[tuple[Any, ...]],
) -> set[str]:
    columns, rows = _filled(table, columns, rows)
    if flavor_of(connection.dialect).arrays:
        result = await connection.execute(_unnest_insert(table, columns, returning=True), _arrays(rows))
        return set(result.scalars())
    found: set[str] = set()
    for start in range(0, len(rows), SQLITE_ROWS):
        chunk = rows[start : start + SQLITE_ROWS]
        flat = tuple(value for row in chunk for value in row)
        result = await connection.exec_driver_sql(_sqlite_insert(table, columns, len(chunk)), flat)
        found.update(row[0] for row in result)
    return found


def _arrays(rows: Sequence[tuple[Any, ...]]) -> dict[str, list[Any]]:
    """Rows as one list per column, named ``c0``, ``c1``, ... for :func:`_unnest_insert`."""
    return {f"c{index}": list(column) for index, column in enumerate(zip(*rows, strict=True))}


@functools.lru_cache(maxsize=64)
def _unnest_insert(table: str, columns: tuple[tuple[str, str], ...], *, returning: bool) -> Any:
    names = ", ".join(name for name, _ in columns)
    arrays = ", ".join(f"CAST(:c{index} AS {kind}[])" for index, (_, kind) in enumerate(columns))
    sql = f"INSERT INTO {table} ({names}) SELECT * FROM unnest({arrays})"  # noqa: S608 (constants only)
    return text(sql + " ON CONFLICT DO NOTHING RETURNING id" if returning else sql)


@functools.lru_cache(maxsize=16)
def _sqlite_append(table: str, columns: tuple[tuple[str, str], ...]) -> str:
    names = ", ".join(name for name, _ in columns)
    marks = ", ".join("?" for _ in columns)
    return f"INSERT INTO {table} ({names}) VALUES ({marks})"  # noqa: S608 (constants only)


@functools.lru_cache(maxsize=64)
def _sqlite_insert(table: str, columns: tuple[tuple[str, str], ...], count: int) -> str:
    names = ", ".join(name for name, _ in columns)
    row = "(" + ", ".join("?" for _ in columns) + ")"
    values = ", ".join([row] * count)
    return f"INSERT INTO {table} ({names}) VALUES {values} ON CONFLICT DO NOTHING RETURNING id"  # noqa: S608


# -- cursors ---------------------------------------------------------------------------------------

# The firings joined to jobs by primary key: one statement per group of firings, whatever its
# size. (An OR of one AND per firing made PostgreSQL plan 500 index conditions per statement, a
# third of a second each with 100,000 jobs, and made SQLite test every CASE branch per row.)
_ADVANCE_POSTGRESQL = """
UPDATE jobs SET next_run_at = firing.next
FROM unnest(CAST(:ids AS varchar[]), CAST(:versions AS integer[]), CAST(:expected AS bigint[]),
            CAST(:next AS bigint[])) AS firing(id, version, expected, next)
WHERE jobs.id = firing.id AND jobs.version = firing.version
  AND jobs.next_run_at IS NOT DISTINCT FROM firing.expected AND jobs.deleted_at IS NULL
"""
_ADVANCE_SQLITE = """
WITH firing(id, version, expected, next) AS (VALUES {values})
UPDATE jobs SET next_run_at = firing.next FROM firing
WHERE jobs.id = firing.id AND jobs.version = firing.version
  AND jobs.next_run_at IS firing.expected AND jobs.deleted_at IS NULL
"""


async def advance_cursors(
    connection: AsyncConnection, firings: Sequence[Firing], held: set[int] | None
) -> set[str]:
    """One conditional UPDATE for a group of firings of distinct jobs: each job's cursor moves
    only if the job is live, at the expected version and at the expected cursor, and (when
    ``held`` is given) in one of the ``held`` shards. Returns the ids of the jobs that moved."""
    if held is not None and not held:
        return set()  # every shard fenced: nothing can move
    with _converting():
        values = [
            (f.job_id, f.expected_version, _micros(f.expected_next_run_at), _micros(f.next_run_at))
            for f in firings
        ]
    if flavor_of(connection.dialect).arrays:
        sql = _ADVANCE_POSTGRESQL
        parameters = _arrays(values)
        named = {"ids": parameters["c0"], "versions": parameters["c1"], "expected": parameters["c2"],
                 "next": parameters["c3"]}  # fmt: skip
        if held is not None:
            sql += "  AND jobs.shard = ANY(CAST(:held AS integer[]))\n"
            named["held"] = sorted(held)
        result = await connection.execute(text(sql + "RETURNING jobs.id"), named)
        return set(result.scalars())
    moved: set[str] = set()
    for start in range(0, len(values), SQLITE_ROWS):
        chunk = values[start : start + SQLITE_ROWS]
        flat = tuple(value for row in chunk for value in row)
        statement = _sqlite_advance(len(chunk), None if held is None else len(held))
        result = await connection.exec_driver_sql(statement, flat + tuple(sorted(held or ())))
        moved.update(row[0] for row in result)
    return moved


@functools.lru_cache(maxsize=64)
def _sqlite_advance(count: int, held: int | None) -> str:
    sql = _ADVANCE_SQLITE.format(values=", ".join(["(?, ?, ?, ?)"] * count))
    if held is not None:
        sql += f"  AND jobs.shard IN ({', '.join(['?'] * held)})\n"
    return sql + "RETURNING jobs.id"


NOTIFIED = (RunState.SUCCESS.value, RunState.FAILED.value)  # the states a run goes to the inbox in
_NOTE_OUTCOME = text("INSERT INTO notification_inbox (run_id, at) VALUES (:run_id, :at)")


async def note_outcomes(connection: AsyncConnection, rows: Sequence[tuple[Any, ...]]) -> None:
    """Put the runs of ``rows`` (event tuples) that reached SUCCESS or FAILED in
    ``notification_inbox``: the notifier (:mod:`cronwheel.notifier.loop`) decides from
    there, so a terminal state and its notification are written together or not at all."""
    done = [{"run_id": row[0], "at": row[1]} for row in rows if row[2] in NOTIFIED]
    if done:
        await connection.execute(_NOTE_OUTCOME, done)  # the instants are epoch microseconds already

"""Jobs: their definitions, labels and lifecycle (create, edit, pause and resume, delete).

Every write of a job is one transaction that also notifies the other processes
(:func:`~cronwheel.store.sql.tx.notify_changed`), and everything a lifecycle change implies is in
that same transaction: a resume records the slots missed while paused (guarantee 2: no silent
miss), a delete flags the job's unfinished runs to stop. A crash between those writes would
otherwise leave a resumed job without its SKIPPED records, or a deleted job's runs running on.
The same deletion (:func:`delete_live`) also runs inside the transaction that records the success
of a one-time job's run (:func:`delete_succeeded`, ``delete_after_success``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    delete,
    exists,
    false,
    func,
    insert,
    select,
    text,
    true,
    type_coerce,
    update,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from cronwheel import failpoints
from cronwheel.audit import SERVER, AuditAction, AuditEntry
from cronwheel.errors import ConflictError, InvalidInputError, NotFoundError, QuotaExceededError
from cronwheel.model import Job, Run, RunState
from cronwheel.store import codec
from cronwheel.store.driver import flavor_of
from cronwheel.store.port import JobQuery, Page
from cronwheel.store.schema import JOB_LIVE, job_labels, jobs, to_micros
from cronwheel.store.snapshots import job_snapshot
from cronwheel.store.sql import armed, audit, bulk, calendars, last_runs
from cronwheel.store.sql.cancels import cancel_active
from cronwheel.store.sql.tx import CHUNK, Transactions, chunks, notify_changed
from cronwheel.store.sql.where import check_limit, check_new_run, check_skipped
from cronwheel.targets.checks import redacted_url

# -- reads -----------------------------------------------------------------------------------------


async def get(tx: Transactions, job_id: str) -> Job:
    async with tx.read() as connection:
        return await live_job(connection, job_id)


async def get_many(tx: Transactions, job_ids: Sequence[str]) -> dict[str, Job]:
    async with tx.read() as connection:
        return await read_many(connection, job_ids)


async def read_many(connection: AsyncConnection, job_ids: Sequence[str]) -> dict[str, Job]:
    """The live jobs of ``job_ids`` (deleted ones are absent), on the caller's connection."""
    found: dict[str, Job] = {}
    for chunk in chunks(sorted(set(job_ids)), CHUNK):
        result = await connection.execute(select(jobs).where(jobs.c.id.in_(chunk), JOB_LIVE))
        found.update((row["id"], codec.job_from_row(row)) for row in result.mappings())
    return found


async def find(tx: Transactions, team: str, name: str) -> Job | None:
    async with tx.read() as connection:
        result = await connection.execute(
            select(jobs).where(jobs.c.team == team, jobs.c.name == name, JOB_LIVE)
        )
        row = result.mappings().first()
    return None if row is None else codec.job_from_row(row)


async def known(tx: Transactions, job_id: str) -> bool:
    """Whether the store holds the job, live or deleted."""
    return await team_of(tx, job_id) is not None


async def team_of(tx: Transactions, job_id: str) -> str | None:
    """The team of the job, live or deleted; None for an id never created."""
    async with tx.read() as connection:
        team = await connection.scalar(select(jobs.c.team).where(jobs.c.id == job_id))
    return None if team is None else str(team)


async def list_page(tx: Transactions, query: JobQuery) -> Page[Job]:
    check_limit(query.limit)
    after = None if query.cursor is None else codec.decode_cursor(query.cursor, (str,))[0]
    statement = (
        select(jobs).where(JOB_LIVE, *_matching(query, after)).order_by(jobs.c.id).limit(query.limit + 1)
    )
    async with tx.read() as connection:
        rows = (await connection.execute(statement)).mappings().all()
    items = [codec.job_from_row(row) for row in rows[: query.limit]]
    more = len(rows) > query.limit
    return Page(items, codec.encode_cursor(items[-1].id) if more else None)


def _matching(query: JobQuery, after: str | None) -> list[ColumnElement[bool]]:
    """The conditions of ``query`` on live jobs, with the page bound ``after`` (a job id)."""
    conditions: list[ColumnElement[bool]] = []
    if query.team is not None:
        conditions.append(jobs.c.team == query.team)
    if query.teams is not None:
        conditions.append(jobs.c.team.in_(sorted(set(query.teams))))
    if query.name is not None:
        conditions.append(jobs.c.name == query.name)
    if query.paused is not None:
        conditions.append(jobs.c.paused == query.paused)
    conditions += [_labelled(key, value, after) for key, value in query.labels]
    if query.last_state is not None:
        teams = [query.team] if query.team is not None else query.teams
        conditions.append(last_runs.in_state(query.last_state, teams, after))
    if query.late_before is not None:  # JOB_DUE's terms literally: its index, ix_jobs_due_at
        conditions += [jobs.c.paused == false(), jobs.c.next_run_at < query.late_before]
        # a jittered slot is late once its whole window has passed (lateness.is_late)
        window_end = type_coerce(jobs.c.next_run_at, BigInteger()) + jobs.c.jitter_s * 1_000_000
        conditions.append(window_end < to_micros(query.late_before))
    if after is not None:
        conditions.append(jobs.c.id > after)
    return conditions


def _labelled(key: str, value: str, after: str | None) -> ColumnElement[bool]:
    label = [job_labels.c.job_id == jobs.c.id, job_labels.c.key == key, job_labels.c.value == value]
    if after is not None:  # the page bound inside too: the (key, value, job_id) index starts there
        label.append(job_labels.c.job_id > after)
    return exists().where(*label)


# -- writes ----------------------------------------------------------------------------------------


async def create(
    tx: Transactions,
    job: Job,
    now: datetime,
    team_quota: int | None = None,
    entry: AuditEntry | None = None,
) -> Job:
    created_at = job.created_at or now
    job = replace(job, created_at=created_at, updated_at=job.updated_at or created_at)
    async with tx.write() as connection:
        await _check_quota(connection, job.team, team_quota)
        await _check_name_free(connection, job.team, job.name, job.id)
        job = await calendars.resolve(connection, job)
        await connection.execute(insert(jobs).values(codec.job_to_row(job)))
        await _write_labels(connection, job.id, job.labels)
        await notify_changed(connection, [job.id])
        created = await live_job(connection, job.id)
        await _audit(connection, entry, None, created)
        return created


async def edit(
    tx: Transactions,
    job: Job,
    expected_version: int | None,
    move_cursor: bool,
    now: datetime,
    team_quota: int | None = None,
    entry: AuditEntry | None = None,
) -> Job:
    job = replace(job, updated_at=job.updated_at or now)
    async with tx.write() as connection:
        before = await _write_definition(connection, job, expected_version, move_cursor, now, team_quota)
        await notify_changed(connection, [job.id])
        after = await live_job(connection, job.id)
        await _audit(connection, entry, before, after)
        return after


async def resume(
    tx: Transactions,
    job: Job,
    expected_version: int | None,
    skipped: Sequence[Run],
    move_cursor: bool,
    now: datetime,
    entry: AuditEntry | None = None,
) -> tuple[Job, list[Run]]:
    """Store the resumed ``job`` as :func:`edit` does and record the ``skipped`` runs, in one
    transaction (``Store.resume_job``)."""
    if job.paused:
        raise InvalidInputError(f"resume_job stores a job that is not paused ({job.id} is)")
    check_skipped(skipped, "resume_job")
    for run in skipped:
        check_new_run(run, job.id)
    job = replace(job, updated_at=job.updated_at or now)
    async with tx.write() as connection:
        before = await _write_definition(connection, job, expected_version, move_cursor, now)
        recorded = await insert_skipped(connection, skipped, now)
        await notify_changed(connection, [job.id])
        after = await live_job(connection, job.id)
        if entry is not None and recorded:
            entry = replace(entry, detail=f"{len(recorded)} slots missed while paused recorded SKIPPED")
        await _audit(connection, entry, before, after)
        return after, recorded


async def record_skipped(tx: Transactions, skipped: Sequence[Run], now: datetime) -> list[Run]:
    check_skipped(skipped, "record_skipped")
    if not skipped:
        return []
    async with tx.write() as connection:
        inserted = await insert_skipped(connection, skipped, now)
        await notify_changed(connection, [run.job_id for run in inserted])
        return inserted


async def mark_deleted(
    tx: Transactions, job_id: str, now: datetime, cancel: bool, entry: AuditEntry | None = None
) -> Job:
    """Delete the job (:func:`delete_live`) in a transaction of its own."""
    async with tx.write() as connection:
        deleted = await delete_live(connection, job_id, now, cancel, entry)
    if deleted is None:
        raise NotFoundError(f"job {job_id} not found")
    return deleted


async def delete_live(
    connection: AsyncConnection, job_id: str, now: datetime, cancel: bool, entry: AuditEntry | None
) -> Job | None:
    """Mark the live job deleted (and bump its version, so in-flight firings of it turn stale),
    erase the secrets of its target (:func:`erased_target`: the row stays, for its runs' history),
    remove its armed runs and notify, in the caller's transaction; with ``cancel``, flag its
    unfinished runs to stop. Returns the deleted job (None: no live job ``job_id``)."""
    live = select(jobs).where(jobs.c.id == job_id, JOB_LIVE).with_for_update()  # the audit's before
    found = (await connection.execute(live)).mappings().first()
    target = None if found is None else found["target"]
    erased = erased_target(target) if isinstance(target, Mapping) else jobs.c.target
    result = await connection.execute(
        update(jobs)
        .where(jobs.c.id == job_id, JOB_LIVE)
        .values(deleted_at=now, updated_at=now, version=jobs.c.version + 1, target=erased)
        .returning(*jobs.c)
    )
    row = result.mappings().first()
    if row is None:
        return None
    await armed.disarm(connection, job_id, now)
    if cancel:
        await cancel_active(connection, job_id)
    await notify_changed(connection, [job_id])
    await _audit(connection, entry, None if found is None else codec.job_from_row(found), None)
    return codec.job_from_row(row)


SUCCESS_DELETES = "its one run succeeded (delete_after_success)"
"""The audit detail of a job deleted by its run's success (its actor: :data:`cronwheel.audit.SERVER`)."""


async def delete_succeeded(connection: AsyncConnection, recorded: Iterable[Run], now: datetime) -> list[str]:
    """Delete, in the caller's transaction (the one that recorded ``recorded``), the live jobs
    with ``delete_after_success`` whose slot run (scheduled or backfill, not manual) is among the
    SUCCESS runs of ``recorded``, as the API's delete does, audited as the server's. Returns
    their ids."""
    job_ids = sorted({run.job_id for run in recorded if _deleting(run)})
    if not job_ids:
        return []
    found = await connection.execute(
        select(jobs.c.id, jobs.c.team, jobs.c.name)
        .where(jobs.c.id.in_(job_ids), JOB_LIVE, jobs.c.delete_after_success == true())
        .order_by(jobs.c.id)
    )
    deleted = []
    for job_id, team, name in found.all():
        failpoints.hit("store.before_success_delete")
        entry = SERVER.entry(AuditAction.JOB_DELETE, now, team, ("job", job_id, name))
        if await delete_live(connection, job_id, now, True, replace(entry, detail=SUCCESS_DELETES)):
            deleted.append(job_id)
    return deleted


def _deleting(run: Run) -> bool:
    return run.state is RunState.SUCCESS and run.kind.keyed_by_slot


ERASED = "(erased)"
"""What every header and environment value of a deleted job becomes."""

_SECRET_PAIRS = ("headers", "env")


def erased_target(stored: Mapping[str, Any]) -> dict[str, Any]:
    """A stored target (its JSON, see :mod:`cronwheel.store.codec`) without what may be a secret:
    every value of its headers and environment (a plain value or a reference to a secret, alike:
    a reference tells which secret the job used) becomes :data:`ERASED`, and its URL loses its
    user info and query values (:func:`cronwheel.targets.checks.redacted_url`). Names, argv, the method
    and the rest stay, so the history still says what the job was."""
    erased = dict(stored)
    for key in _SECRET_PAIRS:
        pairs = erased.get(key)
        if isinstance(pairs, list):
            erased[key] = [[pair[0], ERASED] for pair in pairs if isinstance(pair, list | tuple) and pair]
        elif isinstance(pairs, dict):
            erased[key] = dict.fromkeys(pairs, ERASED)
    if isinstance(erased.get("url"), str):
        erased["url"] = redacted_url(erased["url"])
    return erased


# -- in a transaction ------------------------------------------------------------------------------


async def live_job(connection: AsyncConnection, job_id: str, *, lock: bool = False) -> Job:
    """The live job; with ``lock``, its row locked until the transaction ends (PostgreSQL: ``FOR
    UPDATE``; SQLite's write transaction holds the whole database already), so that what a write
    read is what it changed (the audit entry's ``before``)."""
    statement = select(jobs).where(jobs.c.id == job_id, JOB_LIVE)
    result = await connection.execute(statement.with_for_update() if lock else statement)
    row = result.mappings().first()
    if row is None:
        raise NotFoundError(f"job {job_id} not found")
    return codec.job_from_row(row)


async def insert_skipped(connection: AsyncConnection, skipped: Sequence[Run], now: datetime) -> list[Run]:
    """Insert the SKIPPED runs of slots missed while paused that do not exist yet."""
    failpoints.hit("store.before_skipped_runs")
    inserted = await bulk.insert_runs(connection, skipped, now)
    await last_runs.record(connection, inserted)
    return inserted


async def _audit(
    connection: AsyncConnection, entry: AuditEntry | None, before: Job | None, after: Job | None
) -> None:
    """Append ``entry`` (if any) with the job's snapshots, in the writing transaction."""
    if entry is not None:
        await audit.write(connection, [entry.changed(job_snapshot(before), job_snapshot(after))])


async def _write_definition(
    connection: AsyncConnection,
    job: Job,
    expected_version: int | None,
    move_cursor: bool,
    now: datetime,
    team_quota: int | None = None,
) -> Job:
    """Rewrite the stored job's definition and labels (its cursor only with ``move_cursor``),
    bumping its version; refuse a stale ``expected_version``, a taken name, or a move to a team
    that has ``team_quota`` live jobs already. Returns the job as it was.

    The job's armed runs whose slot is after ``now`` go (:func:`armed.disarm`): without
    ``move_cursor`` the cursor moves back to the first of them, so that the new version (or, once
    paused, the pause) decides that slot again."""
    stored = await live_job(connection, job.id, lock=True)
    if expected_version is not None and stored.version != expected_version:
        raise ConflictError(f"job {job.id} is at version {stored.version}, not {expected_version}")
    job = await calendars.resolve(connection, job)  # the specs as they are now, in this transaction
    first_armed = await armed.disarm(connection, job.id, now)
    cursor: dict[str, Any] = {}
    if move_cursor:
        cursor = {"next_run_at": job.next_run_at}
    elif first_armed is not None:
        cursor = {"next_run_at": first_armed}
    if job.team != stored.team:
        await _check_quota(connection, job.team, team_quota)
    await _check_name_free(connection, job.team, job.name, job.id)
    conditions = [jobs.c.id == job.id, JOB_LIVE]
    if expected_version is not None:
        conditions.append(jobs.c.version == expected_version)
    result = await connection.execute(
        update(jobs)
        .where(*conditions)
        .values(
            **codec.job_definition_to_row(job),
            **cursor,
            version=jobs.c.version + 1,
        )
    )
    if result.rowcount != 1:  # changed or deleted since the read above (PostgreSQL)
        if expected_version is None:
            raise NotFoundError(f"job {job.id} not found")
        raise ConflictError(f"job {job.id} changed concurrently; re-read it")
    await connection.execute(delete(job_labels).where(job_labels.c.job_id == job.id))
    await _write_labels(connection, job.id, job.labels)
    if job.team != stored.team:
        await last_runs.move_team(connection, job.id, job.team)
    return stored


async def _check_quota(connection: AsyncConnection, team: str, quota: int | None) -> None:
    """Refuse one more live job for ``team`` when it has ``quota`` already (None: no quota). On a
    database that writes concurrently the team is locked first, until the transaction ends, so
    that a concurrent write of the same team counts after this one's job (``Flavor.team_locks``).
    The count stops at ``quota``: its cost does not grow with a team that is over it."""
    if quota is None:
        return
    if flavor_of(connection.dialect).team_locks:
        await connection.execute(_LOCK_TEAM, {"team": team})
    live = select(jobs.c.id).where(jobs.c.team == team, JOB_LIVE).limit(quota).subquery()
    if (await connection.scalar(select(func.count()).select_from(live)) or 0) >= quota:
        raise QuotaExceededError(team, quota)


# The two-key form keeps these locks apart from the migrations' one-key lock (store.migrate).
_TEAM_LOCKS = 0x7465616D  # "team"
_LOCK_TEAM = text(f"SELECT pg_advisory_xact_lock({_TEAM_LOCKS}, hashtext(:team))")


async def _check_name_free(connection: AsyncConnection, team: str, name: str, job_id: str) -> None:
    taken = await connection.scalar(
        select(jobs.c.id).where(jobs.c.team == team, jobs.c.name == name, JOB_LIVE, jobs.c.id != job_id)
    )
    if taken is not None:
        raise ConflictError(f"team {team!r} already has a job named {name!r} ({taken})")


async def _write_labels(
    connection: AsyncConnection, job_id: str, labels: tuple[tuple[str, str], ...]
) -> None:
    rows = codec.label_rows(job_id, labels)
    if rows:
        await connection.execute(insert(job_labels), rows)

"""Team calendars, and the resolved copy of them that each job listing them carries.

A job's row holds the union of its calendars' specs (``jobs.calendar_spec``), so that a scheduler
reads nothing but the job. The copy is written in the transaction that writes the job
(:func:`resolve`) and rewritten, with the job's version bumped and its armed runs disarmed, in
the transaction that edits a calendar it lists (:func:`edit`): every node's scheduler reloads
those jobs through the ordinary job-change path. Calendar rows are locked in both (PostgreSQL:
``FOR SHARE`` by a job write, ``FOR UPDATE`` by a calendar write), so a job written while its
calendar changes is either rewritten by that change or reads the new spec itself. A calendar
listed by a live job cannot be deleted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from sqlalchemy import delete, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from cronwheel.audit import AuditEntry
from cronwheel.errors import ConflictError, NotFoundError
from cronwheel.model import Calendar, Job
from cronwheel.schedule.calendar import spec_to_json, union
from cronwheel.store import codec
from cronwheel.store.driver import flavor_of
from cronwheel.store.port import CalendarInUseError, Page, UnknownCalendarError
from cronwheel.store.schema import JOB_LIVE, calendars, jobs
from cronwheel.store.sql import armed, audit
from cronwheel.store.sql.tx import Transactions, notify_changed
from cronwheel.store.sql.where import check_limit


def _snapshot(calendar: Calendar | None) -> dict[str, Any] | None:
    if calendar is None:
        return None
    return {
        "description": calendar.description,
        "spec": spec_to_json(calendar.spec),
        "version": calendar.version,
    }


async def create(tx: Transactions, calendar: Calendar, now: datetime, entry: AuditEntry | None) -> Calendar:
    calendar = replace(calendar, version=1, created_at=now, updated_at=now)
    async with tx.write() as connection:
        if await _read(connection, calendar.team, calendar.name) is not None:
            raise ConflictError(f"team {calendar.team!r} already has a calendar named {calendar.name!r}")
        await connection.execute(insert(calendars).values(codec.calendar_to_row(calendar)))
        if entry is not None:
            await audit.write(connection, [entry.changed(None, _snapshot(calendar))])
    return calendar


async def get(tx: Transactions, team: str, name: str) -> Calendar:
    async with tx.read() as connection:
        found = await _read(connection, team, name)
    if found is None:
        raise NotFoundError(f"team {team!r} has no calendar named {name!r}")
    return found


async def list_page(tx: Transactions, team: str, limit: int, cursor: str | None) -> Page[Calendar]:
    check_limit(limit)
    statement = select(calendars).where(calendars.c.team == team)
    if cursor is not None:
        statement = statement.where(calendars.c.name > codec.decode_cursor(cursor, (str,))[0])
    async with tx.read() as connection:
        result = await connection.execute(statement.order_by(calendars.c.name).limit(limit + 1))
        rows = result.mappings().all()
    items = [codec.calendar_from_row(row) for row in rows[:limit]]
    return Page(items, codec.encode_cursor(items[-1].name) if len(rows) > limit else None)


async def edit(
    tx: Transactions,
    calendar: Calendar,
    expected_version: int | None,
    now: datetime,
    entry: AuditEntry | None,
) -> tuple[Calendar, list[str]]:
    """Replace the calendar's description and spec (version + 1), and rewrite the resolved spec
    of every live job of its team that lists it; returns the calendar and those jobs' ids."""
    async with tx.write() as connection:
        stored = await _read(connection, calendar.team, calendar.name, lock=True)
        if stored is None:
            raise NotFoundError(f"team {calendar.team!r} has no calendar named {calendar.name!r}")
        if expected_version is not None and stored.version != expected_version:
            raise ConflictError(
                f"calendar {calendar.name!r} is at version {stored.version}, not {expected_version}"
            )
        updated = replace(calendar, version=stored.version + 1, created_at=stored.created_at, updated_at=now)
        await connection.execute(
            update(calendars)
            .where(calendars.c.team == calendar.team, calendars.c.name == calendar.name)
            .values(
                description=updated.description,
                spec=spec_to_json(updated.spec),
                version=updated.version,
                updated_at=now,
            )
        )
        job_ids = []  # a description alone changes no job
        if updated.spec != stored.spec:
            job_ids = await _rewrite_jobs(connection, calendar.team, calendar.name, now)
        if job_ids:
            await notify_changed(connection, job_ids)
        if entry is not None:
            await audit.write(connection, [entry.changed(_snapshot(stored), _snapshot(updated))])
    return updated, job_ids


async def remove(tx: Transactions, team: str, name: str, entry: AuditEntry | None) -> Calendar:
    async with tx.write() as connection:
        stored = await _read(connection, team, name, lock=True)
        if stored is None:
            raise NotFoundError(f"team {team!r} has no calendar named {name!r}")
        listing = await _listing(connection, team, name)
        if listing:
            raise CalendarInUseError(team, name, sorted(job.name for job in listing))
        await connection.execute(delete(calendars).where(calendars.c.team == team, calendars.c.name == name))
        if entry is not None:
            await audit.write(connection, [entry.changed(_snapshot(stored), None)])
    return stored


async def resolve(connection: AsyncConnection, job: Job) -> Job:
    """``job`` with the union of its calendars' specs (None without calendars), read in the
    writing transaction; refuse names its team has no calendar of."""
    if not job.calendars:
        return replace(job, calendar_spec=None)
    found = await _read_many(connection, job.team, job.calendars)
    missing = [name for name in job.calendars if name not in found]
    if missing:
        raise UnknownCalendarError(job.team, missing)
    return replace(job, calendar_spec=union(found[name].spec for name in job.calendars))


async def _rewrite_jobs(connection: AsyncConnection, team: str, name: str, now: datetime) -> list[str]:
    """Rewrite the resolved spec of the team's live jobs listing calendar ``name``, bumping their
    version and disarming their armed runs (the cursor back to the first, as a job edit does)."""
    listing = await _listing(connection, team, name)
    if not listing:
        return []
    names = sorted({each for job in listing for each in job.calendars})
    found = await _read_many(connection, team, names)
    for job in listing:
        spec = union(found[each].spec for each in job.calendars if each in found)
        values: dict[str, Any] = {
            "calendar_spec": None if spec is None else spec_to_json(spec),
            "version": jobs.c.version + 1,
            "updated_at": now,
        }
        first_armed = await armed.disarm(connection, job.id, now)
        if first_armed is not None:
            values["next_run_at"] = first_armed
        await connection.execute(update(jobs).where(jobs.c.id == job.id, JOB_LIVE).values(**values))
    return sorted(job.id for job in listing)


async def _listing(connection: AsyncConnection, team: str, name: str) -> list[Job]:
    """The team's live jobs whose calendars list ``name`` (only jobs with calendars are read)."""
    statement = select(jobs).where(jobs.c.team == team, JOB_LIVE, jobs.c.calendar_spec.is_not(None))
    rows = (await connection.execute(statement.order_by(jobs.c.id))).mappings().all()
    listing = [codec.job_from_row(row) for row in rows]
    return [job for job in listing if name in job.calendars]


async def _read(connection: AsyncConnection, team: str, name: str, *, lock: bool = False) -> Calendar | None:
    statement = select(calendars).where(calendars.c.team == team, calendars.c.name == name)
    if lock and flavor_of(connection.dialect).team_locks:
        statement = statement.with_for_update()
    row = (await connection.execute(statement)).mappings().first()
    return None if row is None else codec.calendar_from_row(row)


async def _read_many(connection: AsyncConnection, team: str, names: Sequence[str]) -> dict[str, Calendar]:
    statement = select(calendars).where(calendars.c.team == team, calendars.c.name.in_(sorted(set(names))))
    if flavor_of(connection.dialect).team_locks:  # a calendar edit waits for this write, or it for it
        statement = statement.with_for_update(read=True)
    rows = (await connection.execute(statement)).mappings().all()
    return {row["name"]: codec.calendar_from_row(row) for row in rows}

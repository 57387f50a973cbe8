"""The Store contract for calendars, on every backend (SQLite and PostgreSQL): one per (team,
name), a job carries the union of the calendars it lists (resolved in its write), a calendar
edit rewrites those jobs and bumps their version, and a listed calendar cannot be deleted."""

from __future__ import annotations

import dataclasses
from dataclasses import replace
from datetime import date

import pytest

from cronwheel.clock import ManualClock
from cronwheel.errors import ConflictError, NotFoundError
from cronwheel.model import Calendar, CalendarShift, CalendarSpec
from cronwheel.schedule.calendar import Holidays
from cronwheel.store.port import CalendarInUseError, UnknownCalendarError
from cronwheel.store.sql import SqlStore

from .support import START, at, make_job

WEEKENDS = CalendarSpec(weekdays=(6, 7))
NEW_YEAR = CalendarSpec(dates=(date(2027, 1, 1),), ranges=((date(2027, 12, 24), date(2027, 12, 26)),))
BAVARIA = CalendarSpec(holidays=(Holidays("DE", "BY"),))


def calendar(name: str = "weekends", spec: CalendarSpec = WEEKENDS, team: str = "ops") -> Calendar:
    return Calendar(team=team, name=name, spec=spec, description=f"{name} closed")


async def test_create_get_list_and_the_name_is_unique_per_team(store: SqlStore) -> None:
    created = await store.create_calendar(calendar())
    assert (created.version, created.created_at, created.updated_at) == (1, START, START)
    assert await store.get_calendar("ops", "weekends") == created
    await store.create_calendar(calendar("bavaria", BAVARIA))
    await store.create_calendar(calendar("weekends", team="billing"))  # another team: its own name
    with pytest.raises(ConflictError):
        await store.create_calendar(calendar())
    page = await store.list_calendars("ops", limit=1)
    assert [c.name for c in page.items] == ["bavaria"]
    assert page.next_cursor is not None
    rest = await store.list_calendars("ops", cursor=page.next_cursor)
    assert [c.name for c in rest.items] == ["weekends"]
    assert rest.next_cursor is None
    assert (await store.get_calendar("ops", "bavaria")).spec == BAVARIA
    with pytest.raises(NotFoundError):
        await store.get_calendar("nobody", "weekends")


async def test_a_job_carries_the_union_of_its_calendars(store: SqlStore) -> None:
    await store.create_calendar(calendar())
    await store.create_calendar(calendar("new-year", NEW_YEAR))
    job = make_job(calendars=("weekends", "new-year"), calendar_shift=CalendarShift.PREVIOUS)
    created = await store.create_job(job)
    assert created.calendar_spec == WEEKENDS.union(NEW_YEAR)
    assert (created.calendars, created.calendar_shift) == (("weekends", "new-year"), CalendarShift.PREVIOUS)
    (due,) = await store.due_jobs(START)
    assert (due.calendar_spec, due.calendar_shift) == (WEEKENDS.union(NEW_YEAR), CalendarShift.PREVIOUS)
    fewer = await store.update_job(dataclasses.replace(created, calendars=("weekends",)), created.version)
    assert fewer.calendar_spec == WEEKENDS
    none = await store.update_job(dataclasses.replace(fewer, calendars=()), fewer.version)
    assert none.calendar_spec is None
    (due,) = await store.due_jobs(START)
    assert due.calendar_spec is None


async def test_a_job_listing_an_unknown_calendar_is_refused_and_nothing_written(store: SqlStore) -> None:
    await store.create_calendar(calendar(team="billing"))  # another team's: unknown to ops
    with pytest.raises(UnknownCalendarError) as refused:
        await store.create_job(make_job(calendars=("weekends",)))
    assert refused.value.field == "calendars"
    assert await store.find_job("ops", "backup") is None


async def test_an_edit_rewrites_the_jobs_listing_it_and_bumps_their_version(
    store: SqlStore, clock: ManualClock
) -> None:
    await store.create_calendar(calendar())
    await store.create_calendar(calendar("new-year", NEW_YEAR))
    listing = await store.create_job(make_job("a", calendars=("weekends", "new-year")))
    other = await store.create_job(make_job("b", calendars=("new-year",)))
    plain = await store.create_job(make_job("c"))
    clock.set(at(5))
    edited, job_ids = await store.update_calendar(calendar(spec=CalendarSpec(weekdays=(7,))), 1)
    assert (edited.version, edited.created_at, edited.updated_at) == (2, START, at(5))
    assert job_ids == [listing.id]
    rewritten = await store.get_job(listing.id)
    assert rewritten.calendar_spec == CalendarSpec(weekdays=(7,)).union(NEW_YEAR)
    assert rewritten.version == listing.version + 1
    assert await store.get_job(other.id) == other  # lists only the other calendar: untouched
    assert await store.get_job(plain.id) == plain
    described, none = await store.update_calendar(replace(edited, description="only words"), 2)
    assert (described.version, none) == (3, [])  # a description alone rewrites no job
    assert (await store.get_job(listing.id)).version == rewritten.version
    with pytest.raises(ConflictError):
        await store.update_calendar(calendar(), 1)  # stale version
    with pytest.raises(NotFoundError):
        await store.update_calendar(calendar("nothing"))


async def test_a_listed_calendar_cannot_be_deleted(store: SqlStore) -> None:
    await store.create_calendar(calendar())
    job = await store.create_job(make_job("payroll", calendars=("weekends",)))
    with pytest.raises(CalendarInUseError) as refused:
        await store.delete_calendar("ops", "weekends")
    assert refused.value.jobs == ["payroll"]
    await store.delete_job(job.id, at(1))
    deleted = await store.delete_calendar("ops", "weekends")
    assert deleted.name == "weekends"
    with pytest.raises(NotFoundError):
        await store.get_calendar("ops", "weekends")
    with pytest.raises(NotFoundError):
        await store.delete_calendar("ops", "weekends")

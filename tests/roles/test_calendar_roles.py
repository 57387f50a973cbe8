"""Calendars through the scheduler over the real store (SQLite and PostgreSQL): a slot on a closed
day is recorded SKIPPED (reason ``calendar``) and fires nothing, and a calendar's edit reaches the
scheduler through the job-change path (the jobs listing it reload, armed runs included)."""

from __future__ import annotations

from datetime import date

from cronwheel.jobs.calendars import CalendarService
from cronwheel.model import Calendar, CalendarSpec, RunState

from .harness import START, Roles, at, minutes

TODAY = START.date()  # a Monday


async def calendar(roles: Roles, closed: date, name: str = "closures") -> CalendarService:
    service = CalendarService(roles.store, roles.feed, roles.clock)
    await service.create(Calendar("ops", name, CalendarSpec(dates=(closed,))))
    return service


async def test_every_slot_of_a_closed_day_is_recorded_skipped_and_none_fires(roles: Roles) -> None:
    await calendar(roles, TODAY)
    job = await roles.create(calendars=("closures",))
    for minute in range(1, 4):
        await roles.tick(at(minute))
    assert await roles.table(job.id) == [(slot, RunState.SKIPPED, "calendar") for slot in minutes(1, 2, 3)]
    assert await roles.receive() == []  # no trigger
    assert roles.scheduler.stats.fired == 0
    assert (await roles.store.get_job(job.id)).next_run_at == at(4)


async def test_a_calendar_edit_reaches_the_scheduler(roles: Roles) -> None:
    service = await calendar(roles, date(2026, 12, 25))
    job = await roles.create(calendars=("closures",))
    await roles.tick(at(1))
    await roles.tick(at(1, 30))  # the next slot may be armed ahead by now
    assert await roles.table(job.id) == [(at(1), RunState.PENDING, None)]
    assert len(await roles.receive()) == 1

    await service.update(Calendar("ops", "closures", CalendarSpec(dates=(TODAY,))))
    await roles.notify()  # the job listing it changed: the scheduler reloads it
    assert (await roles.store.get_job(job.id)).version == job.version + 1
    await roles.tick(at(2))
    await roles.tick(at(3))
    assert await roles.table(job.id) == [
        (at(1), RunState.PENDING, None),
        (at(2), RunState.SKIPPED, "calendar"),
        (at(3), RunState.SKIPPED, "calendar"),
    ]
    assert await roles.receive() == []


async def test_a_scheduler_that_arms_ahead_records_closed_slots_at_their_time(roles: Roles) -> None:
    """An excluded slot is never armed, and the job stays in the wheel for its slot's decision."""
    await calendar(roles, TODAY)
    arming = roles.new_scheduler("armer", arm_ahead_s=30.0, release_ahead_s=0.0)
    roles.scheduler = arming  # notifications go to it
    job = await roles.create(calendars=("closures",))
    for minute in range(1, 4):
        await roles.tick(at(minute - 1, 59), arming)  # within the arming lead of the slot
        await roles.tick(at(minute), arming)
    assert await roles.table(job.id) == [(slot, RunState.SKIPPED, "calendar") for slot in minutes(1, 2, 3)]
    assert await roles.receive() == []

"""The planner with calendars: an excluded slot is recorded SKIPPED (reason ``calendar``), never
fired nor silently absent; a shift fires the same local time on the nearest open day."""

from __future__ import annotations

import dataclasses
import itertools
from datetime import UTC, date, datetime, timedelta

from cronwheel.model import (
    CalendarShift,
    CalendarSpec,
    DueJob,
    HttpTarget,
    Job,
    MisfireMode,
    MisfirePolicy,
    RunState,
    SkipReason,
)
from cronwheel.scheduler.planner import arm, first_slot, plan

MONDAY = datetime(2027, 1, 4, 9, tzinfo=UTC)
WEEKENDS = CalendarSpec(weekdays=(6, 7))


def job(**changes: object) -> Job:
    base = Job(
        id="job-1",
        team="t",
        name="n",
        schedule="0 9 * * *",
        target=HttpTarget("https://example.com/hook"),
        calendars=("weekends",),
        calendar_spec=WEEKENDS,
        next_run_at=MONDAY,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def decide(j: Job | DueJob, now: datetime) -> list[tuple[str, str, str | None]]:
    counter = itertools.count(1)
    firing = plan(j, now, [], lambda: f"run-{next(counter)}")
    assert firing is not None
    return [(r.slot.strftime("%a %d %H:%M"), r.state.value, r.reason) for r in firing.runs]


def test_an_excluded_slot_is_recorded_skipped_with_reason_calendar() -> None:
    saturday = MONDAY + timedelta(days=5)
    assert decide(job(next_run_at=saturday), saturday) == [("Sat 09 09:00", "SKIPPED", "calendar")]
    assert decide(job(), MONDAY) == [("Mon 04 09:00", "PENDING", None)]


def test_a_backlog_records_each_closed_slot_and_the_misfire_policy_decides_the_open_ones() -> None:
    catch_up = MisfirePolicy(MisfireMode.RUN_ONCE)
    j = job(misfire=catch_up, next_run_at=MONDAY + timedelta(days=4))  # Friday
    assert decide(j, MONDAY + timedelta(days=7, hours=1)) == [
        ("Fri 08 09:00", "SKIPPED", "misfire"),
        ("Sat 09 09:00", "SKIPPED", "calendar"),
        ("Sun 10 09:00", "SKIPPED", "calendar"),
        ("Mon 11 09:00", "PENDING", None),  # the newest open slot: run_once fires it
    ]
    ends_closed = job(misfire=catch_up, next_run_at=MONDAY + timedelta(days=4))
    assert decide(ends_closed, MONDAY + timedelta(days=6, hours=1)) == [
        ("Fri 08 09:00", "PENDING", None),  # the newest open slot, though closed ones come after
        ("Sat 09 09:00", "SKIPPED", "calendar"),
        ("Sun 10 09:00", "SKIPPED", "calendar"),
    ]


def test_the_slim_job_decides_alike() -> None:
    saturday = MONDAY + timedelta(days=5)
    slim = DueJob.of(job(next_run_at=saturday))
    assert (slim.calendar_spec, slim.calendar_shift) == (WEEKENDS, CalendarShift.NONE)
    assert slim.moved(MONDAY).calendar_spec == WEEKENDS
    assert decide(slim, saturday) == [("Sat 09 09:00", "SKIPPED", "calendar")]


def test_an_excluded_slot_is_not_armed_ahead() -> None:
    saturday = MONDAY + timedelta(days=5)
    assert arm(job(next_run_at=saturday), saturday - timedelta(minutes=5), lambda: "r") is None
    armed = arm(job(), MONDAY - timedelta(minutes=5), lambda: "r")
    assert armed is not None
    assert [r.state for r in armed.runs] == [RunState.PENDING]


def test_a_shift_to_the_next_open_day_fires_there_after_recording_the_slot() -> None:
    j = job(schedule="0 9 9 1 *", calendar_shift=CalendarShift.NEXT)  # Jan 9 2027, a Saturday
    cursor = first_slot(j, MONDAY)
    assert cursor == datetime(2027, 1, 9, 9, tzinfo=UTC)
    firing = plan(dataclasses.replace(j, next_run_at=cursor), cursor, [], lambda: "r1")
    assert firing is not None
    assert [(r.slot, r.state, r.reason) for r in firing.runs] == [
        (cursor, RunState.SKIPPED, SkipReason.CALENDAR)
    ]
    assert firing.next_run_at == datetime(2027, 1, 11, 9, tzinfo=UTC)  # Monday: the shifted run
    monday = datetime(2027, 1, 11, 9, tzinfo=UTC)
    assert decide(dataclasses.replace(j, next_run_at=monday), monday) == [("Mon 11 09:00", "PENDING", None)]


def test_a_shift_to_the_previous_open_day_comes_before_its_slot() -> None:
    j = job(schedule="0 9 9 1 *", calendar_shift=CalendarShift.PREVIOUS)
    assert first_slot(j, MONDAY) == datetime(2027, 1, 8, 9, tzinfo=UTC)  # Friday, then Saturday's record
    assert first_slot(j, datetime(2027, 1, 8, 9, tzinfo=UTC)) == datetime(2027, 1, 9, 9, tzinfo=UTC)


def test_a_job_without_calendars_walks_its_schedule_alone() -> None:
    plain = job(calendars=(), calendar_spec=None, next_run_at=MONDAY + timedelta(days=5))
    assert decide(plain, MONDAY + timedelta(days=5)) == [("Sat 09 09:00", "PENDING", None)]
    assert WEEKENDS.excludes(date(2027, 1, 9))


def test_a_shifted_run_a_calendar_edit_took_away_is_passed_over_without_a_record() -> None:
    monday = datetime(2027, 1, 11, 9, tzinfo=UTC)  # where Saturday Jan 9's slot was shifted to
    opened = job(
        schedule="0 9 9 1 *",
        calendar_shift=CalendarShift.NEXT,
        calendar_spec=CalendarSpec(),
        next_run_at=monday,
    )
    firing = plan(opened, monday, [], lambda: "r1")
    assert firing is not None
    assert firing.runs == ()
    assert (firing.expected_next_run_at, firing.next_run_at) == (monday, datetime(2028, 1, 9, 9, tzinfo=UTC))
    still = dataclasses.replace(opened, calendar_spec=WEEKENDS)  # Saturday still closed: a real run
    assert decide(still, monday) == [("Mon 11 09:00", "PENDING", None)]

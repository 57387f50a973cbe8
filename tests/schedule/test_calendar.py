"""Calendars: closed days, validation, the holidays data, and the schedule that yields a job's
nominal slots and shifted runs, checked against a brute-force walk day by day."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cronwheel.schedule import parse_schedule
from cronwheel.schedule.calendar import (
    MAX_ITEMS,
    SHIFT_DAYS,
    CalendarError,
    CalendarSchedule,
    CalendarShift,
    CalendarSpec,
    Holidays,
    check_spec,
    spec_from_json,
    spec_to_json,
)

START = datetime(2027, 1, 1, tzinfo=UTC)
BERLIN = ZoneInfo("Europe/Berlin")


# -- closed days ---------------------------------------------------------------------------------


def brute_excludes(spec: CalendarSpec, day: date) -> bool:
    return (
        day in spec.dates
        or day.isoweekday() in spec.weekdays
        or any(lo <= day <= hi for lo, hi in spec.ranges)
    )


days = st.dates(date(2026, 12, 1), date(2027, 3, 31))
specs = st.builds(
    CalendarSpec,
    dates=st.lists(days, max_size=12, unique=True).map(lambda d: tuple(sorted(d))),
    ranges=st.lists(st.tuples(days, st.integers(0, 6)), max_size=4).map(
        lambda rs: tuple(sorted({(lo, lo + timedelta(days=n)) for lo, n in rs}))
    ),
    weekdays=st.lists(st.integers(1, 7), max_size=3, unique=True).map(lambda w: tuple(sorted(w))),
)


@given(specs, days)
def test_a_day_is_closed_exactly_as_the_brute_force_says(spec: CalendarSpec, day: date) -> None:
    assert spec.excludes(day) == brute_excludes(spec, day)


@given(specs)
def test_a_spec_survives_its_json(spec: CalendarSpec) -> None:
    assert spec_from_json(spec_to_json(spec)) == spec


@given(specs, specs, days)
def test_a_union_closes_what_either_closes(a: CalendarSpec, b: CalendarSpec, day: date) -> None:
    assert a.union(b).excludes(day) == (a.excludes(day) or b.excludes(day))


def test_holidays_of_a_country_and_subdivision_are_closed() -> None:
    bavaria = CalendarSpec(holidays=(Holidays("DE", "BY"),))
    assert bavaria.excludes(date(2027, 1, 6))  # Epiphany, a holiday in Bavaria
    assert not CalendarSpec(holidays=(Holidays("DE", "BE"),)).excludes(date(2027, 1, 6))  # not in Berlin
    assert not bavaria.excludes(date(2027, 1, 7))
    us = CalendarSpec(holidays=(Holidays("US"),))
    assert us.excludes(date(2027, 7, 5))  # Independence Day (Sunday) observed on Monday
    assert us.excludes(date(2027, 7, 4))


# -- validation ----------------------------------------------------------------------------------


def test_a_valid_calendar_is_normalized() -> None:
    spec = check_spec(["2027-01-02", "2027-01-01"], [("2027-02-01", "2027-02-03")], ["sun", "sat"], None)
    assert spec == CalendarSpec(
        (date(2027, 1, 1), date(2027, 1, 2)), ((date(2027, 2, 1), date(2027, 2, 3)),), (6, 7), ()
    )


@pytest.mark.parametrize(
    ("parts", "field", "code"),
    [
        ((["2027-13-01"], [], [], None), "dates[0]", "invalid_calendar"),
        ((["2027-1-1"], [], [], None), "dates[0]", "invalid_calendar"),
        ((["2027-01-01", "2027-01-01"], [], [], None), "dates[1]", "duplicate"),
        (([], [("2027-02-03", "2027-02-01")], [], None), "ranges[0]", "range_reversed"),
        (([], [("2027-02-01", "2027-02-03")] * 2, [], None), "ranges[1]", "duplicate"),
        (([], [], ["monday"], None), "weekdays[0]", "invalid_calendar"),
        (([], [], ["mon", "mon"], None), "weekdays[1]", "duplicate"),
        (([], [], [], Holidays("XX")), "holidays.country", "unknown_country"),
        (([], [], [], Holidays("DE", "ZZ")), "holidays.subdivision", "unknown_subdivision"),
        (([f"2027-01-{d:02}" for d in range(1, 2)] * (MAX_ITEMS + 1), [], [], None), "dates", "too_many"),
    ],
)
def test_a_bad_part_is_refused_with_its_field_and_code(parts: tuple, field: str, code: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(CalendarError) as refused:
        check_spec(*parts)
    assert (refused.value.field, refused.value.code) == (field, code)


# -- the schedule: nominal slots and shifted runs ------------------------------------------------


def brute_timeline(
    expression: str, zone: str, spec: CalendarSpec, shift: CalendarShift, start: datetime, end: datetime
) -> tuple[list[datetime], set[datetime]]:
    """Every instant in (start, end]: the nominal slots (those excluded flagged) and each excluded
    slot's shift, found by walking day by day from the slot's local date; and the excluded ones."""
    schedule = parse_schedule(expression, zone)
    tz = ZoneInfo(zone)
    margin = timedelta(days=SHIFT_DAYS + 2)
    nominal, slot = [], schedule.next_after(start - margin)
    while slot is not None and slot <= end + margin:
        nominal.append(slot.astimezone(UTC))
        slot = schedule.next_after(slot)
    closed = {s for s in nominal if brute_excludes(spec, s.astimezone(tz).date())}
    instants = set(nominal)
    for s in closed:
        if shift is CalendarShift.NONE:
            continue
        local, step = s.astimezone(tz), timedelta(days=1 if shift is CalendarShift.NEXT else -1)
        for n in range(1, SHIFT_DAYS + 1):
            day = local.date() + n * step
            if not brute_excludes(spec, day):
                instants.add(
                    datetime.combine(day, time(local.hour, local.minute, local.second), tz).astimezone(UTC)
                )
                break
    return sorted(i for i in instants if start < i <= end), {c for c in closed if start < c <= end}


def walk(schedule: CalendarSchedule, start: datetime, end: datetime) -> list[datetime]:
    found, at = [], schedule.next_after(start)
    while at is not None and at <= end:
        found.append(at)
        at = schedule.next_after(at)
    return found


EXPRESSIONS = ["0 9 * * *", "30 17 * * 1-5", "0 9 L * *", "0 0 1,15 * *", "0 12 * * 0"]


@settings(max_examples=60, deadline=None)
@given(
    specs,
    st.sampled_from(EXPRESSIONS),
    st.sampled_from(list(CalendarShift)),
    st.sampled_from(["UTC", "Europe/Berlin"]),
)
def test_the_schedule_yields_the_brute_forces_instants_in_order(
    spec: CalendarSpec, expression: str, shift: CalendarShift, zone: str
) -> None:
    schedule = CalendarSchedule(parse_schedule(expression, zone), spec, shift)
    end = START + timedelta(days=70)
    expected, closed = brute_timeline(expression, zone, spec, shift, START, end)
    found = walk(schedule, START, end)
    assert found == expected  # in time order, each instant once: a shift onto a slot is that slot
    assert {at for at in found if schedule.excluded(at)} == closed
    for at in found:
        origin = schedule.shifted_from(at)
        if origin is not None:
            assert schedule.excluded(origin)
            assert schedule.shifted(origin) == at
            assert at not in closed


def test_without_a_shift_the_schedule_is_the_nominal_one() -> None:
    spec = CalendarSpec(weekdays=(6, 7))
    base = parse_schedule("0 9 * * *", "UTC")
    found = walk(CalendarSchedule(base, spec), START, START + timedelta(days=14))
    assert len(found) == 14  # every day, weekends included: they are recorded SKIPPED, not absent
    assert [at.day for at in found if CalendarSchedule(base, spec).excluded(at)] == [2, 3, 9, 10]


def test_the_excluded_date_is_the_local_date_in_the_jobs_zone() -> None:
    spec = CalendarSpec(dates=(date(2027, 1, 5),))
    # 23:30 UTC on Jan 4 is 00:30 on Jan 5 in Berlin
    berlin = CalendarSchedule(parse_schedule("30 0 * * *", "Europe/Berlin"), spec)
    assert berlin.excluded(datetime(2027, 1, 4, 23, 30, tzinfo=UTC))
    assert not CalendarSchedule(parse_schedule("30 23 * * *", "UTC"), spec).excluded(
        datetime(2027, 1, 4, 23, 30, tzinfo=UTC)
    )


def test_a_shift_finds_no_open_day_within_its_bound() -> None:
    closed = CalendarSpec(ranges=((date(2027, 1, 1), date(2027, 3, 31)),))
    schedule = CalendarSchedule(parse_schedule("0 9 * * *", "UTC"), closed, CalendarShift.NEXT)
    assert schedule.shifted(datetime(2027, 1, 10, 9, tzinfo=UTC)) is None  # 80 days away: only skipped
    assert schedule.shifted(datetime(2027, 3, 20, 9, tzinfo=UTC)) == datetime(2027, 4, 1, 9, tzinfo=UTC)


def test_payroll_fires_on_the_last_business_day_of_each_month() -> None:
    """``0 9 L * *`` with weekends and German holidays closed, shifted to the previous open day:
    a year of fires, each on the month's last business day (brute force: walk back from the end)."""
    spec = CalendarSpec(weekdays=(6, 7), holidays=(Holidays("DE", "BY"),))
    schedule = CalendarSchedule(parse_schedule("0 9 L * *", "Europe/Berlin"), spec, CalendarShift.PREVIOUS)
    start = datetime(2026, 12, 31, 12, tzinfo=UTC)
    fired = [
        at
        for at in walk(schedule, start, datetime(2027, 12, 31, 23, tzinfo=UTC))
        if not schedule.excluded(at)
    ]
    expected = []
    for month in range(1, 13):
        day = (date(2027, month % 12 + 1, 1) if month < 12 else date(2028, 1, 1)) - timedelta(days=1)
        while brute_excludes(CalendarSpec(weekdays=(6, 7)), day) or spec.excludes(day):
            day -= timedelta(days=1)
        expected.append(datetime.combine(day, time(9), BERLIN).astimezone(UTC))
    assert fired == expected
    assert fired[0].date() == date(2027, 1, 29)  # Jan 31 2027 is a Sunday: Friday the 29th
    assert fired[11].date() == date(2027, 12, 31)  # a Friday, and no holiday: as scheduled

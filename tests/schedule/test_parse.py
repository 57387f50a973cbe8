"""Parsing: every form of the dialect, every refusal and its message, and the caches."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from itertools import pairwise
from typing import Any

import pytest

from cronwheel.errors import CronwheelError, InvalidInputError
from cronwheel.schedule import Schedule, ScheduleError, parse_cron, parse_schedule

START = datetime(2026, 1, 1, tzinfo=UTC)  # a Thursday


def fires(expression: str, count: int = 5, start: datetime = START, **options: Any) -> list[str]:
    schedule = parse_schedule(expression, **options)
    times = [at for _, at in zip(range(count), schedule.iter_after(start), strict=False)]
    return [at.strftime("%Y-%m-%d %H:%M:%S") for at in times]


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("* * * * *", ["2026-01-01 00:01:00", "2026-01-01 00:02:00"]),
        ("*/15 * * * *", ["2026-01-01 00:15:00", "2026-01-01 00:30:00"]),
        ("5-59/20 * * * *", ["2026-01-01 00:05:00", "2026-01-01 00:25:00"]),
        ("5/20 * * * *", ["2026-01-01 00:05:00", "2026-01-01 00:25:00"]),
        ("0 8,12 * * *", ["2026-01-01 08:00:00", "2026-01-01 12:00:00"]),
        ("0 9-10 * * *", ["2026-01-01 09:00:00", "2026-01-01 10:00:00"]),
        ("0 0 * JAN,mar *", ["2026-01-02 00:00:00", "2026-01-03 00:00:00"]),
        ("0 0 1 feb-Mar *", ["2026-02-01 00:00:00", "2026-03-01 00:00:00"]),
        ("0 0 * * SUN", ["2026-01-04 00:00:00", "2026-01-11 00:00:00"]),
        ("0 0 * * 0", ["2026-01-04 00:00:00", "2026-01-11 00:00:00"]),
        ("0 0 * * 7", ["2026-01-04 00:00:00", "2026-01-11 00:00:00"]),
        ("0 0 * * 5-7", ["2026-01-02 00:00:00", "2026-01-03 00:00:00", "2026-01-04 00:00:00"]),
        ("0 0 * * mon-fri", ["2026-01-02 00:00:00", "2026-01-05 00:00:00", "2026-01-06 00:00:00"]),
        ("0 0 */7 * *", ["2026-01-08 00:00:00", "2026-01-15 00:00:00", "2026-01-22 00:00:00"]),
        ("0 0 29-31/7 * *", ["2026-01-29 00:00:00", "2026-03-29 00:00:00"]),
        ("*/20 * * * * *", ["2026-01-01 00:00:20", "2026-01-01 00:00:40", "2026-01-01 00:01:00"]),
        ("30 0 0 * * *", ["2026-01-01 00:00:30", "2026-01-02 00:00:30"]),
        ("@hourly", ["2026-01-01 01:00:00", "2026-01-01 02:00:00"]),
        ("@daily", ["2026-01-02 00:00:00", "2026-01-03 00:00:00"]),
        ("@midnight", ["2026-01-02 00:00:00"]),
        ("@weekly", ["2026-01-04 00:00:00", "2026-01-11 00:00:00"]),
        ("@monthly", ["2026-02-01 00:00:00", "2026-03-01 00:00:00"]),
        ("@yearly", ["2027-01-01 00:00:00", "2028-01-01 00:00:00"]),
        ("@ANNUALLY", ["2027-01-01 00:00:00"]),
        ("  0   12 * * *  ", ["2026-01-01 12:00:00"]),
        ("0\t12\t*\t*\t*", ["2026-01-01 12:00:00"]),
    ],
)
def test_standard_forms(expression: str, expected: list[str]) -> None:
    assert fires(expression, len(expected)) == expected


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        # L: last day of the month
        ("0 0 L * *", ["2026-01-31", "2026-02-28", "2026-03-31", "2026-04-30"]),
        ("0 0 L 2 *", ["2026-02-28", "2027-02-28", "2028-02-29"]),
        # LW: last weekday. 2026-01-31 is a Saturday, 2026-05-31 a Sunday.
        ("0 0 LW * *", ["2026-01-30", "2026-02-27", "2026-03-31", "2026-04-30", "2026-05-29"]),
        # 15W: nearest weekday. 2026-02-15 is a Sunday -> Monday 16; 2026-08-15 a Saturday -> 14.
        ("0 0 15W 2,3,8 *", ["2026-02-16", "2026-03-16", "2026-08-14"]),
        # 1W never leaves the month: 2026-08-01 is a Saturday -> Monday 3rd.
        ("0 0 1W 8 *", ["2026-08-03"]),
        # 31W: 2026-05-31 is a Sunday -> Friday 29th (not June 1st).
        ("0 0 31W 5 *", ["2026-05-29"]),
        # 5L: last Friday of the month.
        ("0 0 * * 5L", ["2026-01-30", "2026-02-27", "2026-03-27"]),
        ("0 0 * * FRIL", ["2026-01-30", "2026-02-27"]),
        # MON#2: second Monday.
        ("0 0 * * MON#2", ["2026-01-12", "2026-02-09", "2026-03-09"]),
        ("0 0 * * 1#5", ["2026-03-30", "2026-06-29", "2026-08-31"]),
        ("0 0 * * 0#1,6#1", ["2026-01-03", "2026-01-04", "2026-02-01", "2026-02-07"]),
        # ? is * in the day fields
        ("0 0 ? * MON", ["2026-01-05", "2026-01-12"]),
        ("0 0 1 * ?", ["2026-02-01", "2026-03-01"]),
        # lists mix plain days and extensions
        ("0 0 1,L * *", ["2026-01-31", "2026-02-01", "2026-02-28", "2026-03-01"]),
    ],
)
def test_extensions(expression: str, expected: list[str]) -> None:
    got = [day[:10] for day in fires(expression, len(expected))]
    assert got == expected


class TestDayOfMonthOrDayOfWeek:
    def test_both_restricted_means_either(self) -> None:
        # the 1st and the 13th of January 2026, or any Friday
        got = [d[:10] for d in fires("0 0 1,13 * FRI", 5)]
        assert got == ["2026-01-02", "2026-01-09", "2026-01-13", "2026-01-16", "2026-01-23"]

    def test_star_prefixed_day_of_month_means_both(self) -> None:
        # */2 starts with '*': odd days that are also Mondays
        got = [d[:10] for d in fires("0 0 */2 * MON", 3)]
        assert got == ["2026-01-05", "2026-01-19", "2026-02-09"]

    def test_star_prefixed_day_of_week_means_both(self) -> None:
        got = [d[:10] for d in fires("0 0 1-7 * */6", 3)]  # Sundays or Saturdays in days 1-7
        assert got == ["2026-01-03", "2026-01-04", "2026-02-01"]

    def test_question_mark_is_unrestricted(self) -> None:
        assert fires("0 0 15 * ?", 2) == ["2026-01-15 00:00:00", "2026-02-15 00:00:00"]


class TestHash:
    def test_same_seed_same_schedule(self) -> None:
        first = fires("H H * * *", 3, seed="job-1")
        assert fires("H H * * *", 3, seed="job-1") == first

    def test_seeds_spread_over_the_hour(self) -> None:
        minutes = Counter(parse_cron("H * * * *", seed=f"job-{i}").minutes.first for i in range(6000))
        assert len(minutes) == 60  # every minute is used
        assert max(minutes.values()) < 2 * 6000 / 60  # and none is crowded

    def test_hash_with_step_keeps_the_step(self) -> None:
        values = parse_cron("H/15 * * * *", seed="abc").minutes.values()
        assert len(values) == 4
        assert [b - a for a, b in pairwise(values)] == [15, 15, 15]
        assert values[0] < 15

    def test_hash_range(self) -> None:
        for i in range(200):
            (value,) = parse_cron("H(0-29) * * * *", seed=str(i)).minutes.values()
            assert 0 <= value <= 29

    def test_hash_range_with_step(self) -> None:
        values = parse_cron("H(10-40)/10 * * * *", seed="x").minutes.values()
        assert len(values) in (3, 4)
        assert all(10 <= v <= 40 for v in values)
        assert values[0] < 20

    def test_day_of_month_hash_exists_in_every_month(self) -> None:
        for i in range(300):
            (day,) = [d for d in range(32) if parse_cron("0 0 H * *", seed=str(i)).days.dom.days >> d & 1]
            assert 1 <= day <= 28

    def test_each_element_gets_its_own_value(self) -> None:
        distinct = {len(parse_cron("H,H * * * *", seed=str(i)).minutes.values()) for i in range(50)}
        assert 2 in distinct

    def test_seed_is_irrelevant_without_h(self) -> None:
        assert parse_schedule("0 * * * *", seed="a") is parse_schedule("0 * * * *", seed="b")


@pytest.mark.parametrize(
    ("expression", "field", "column", "reason"),
    [
        ("61 * * * *", "minute", 1, "61 is out of range 0-59"),
        ("* 24 * * *", "hour", 3, "24 is out of range 0-23"),
        ("* * 0 * *", "day-of-month", 5, "0 is out of range 1-31"),
        ("* * 32 * *", "day-of-month", 5, "32 is out of range 1-31"),
        ("* * * 13 *", "month", 7, "13 is out of range 1-12"),
        ("* * * * 8", "day-of-week", 9, "8 is out of range 0-7"),
        ("60 * * * * *", "second", 1, "60 is out of range 0-59"),
        ("5-1 * * * *", "minute", 1, "range 5-1 is inverted"),
        ("* * * * FRI-MON", "day-of-week", 9, "range 5-1 is inverted"),
        ("*/0 * * * *", "minute", 3, "step must not be zero"),
        ("*/60 * * * *", "minute", 3, "step 60 is larger than the range 0-59"),
        ("*/x * * * *", "minute", 3, "step 'x' is not a number"),
        ("* * * FOO *", "month", 7, "unknown name 'FOO'"),
        ("* * * * MONDAY", "day-of-week", 9, "unknown name 'MONDAY'"),
        ("* * * * monday", "day-of-week", 9, "unknown name 'monday'"),
        ("* * l * *", None, None, None),
        ("h * 15w * mon#2,fril", None, None, None),
        ("* * * JAN-FOO *", "month", 11, "unknown name 'FOO'"),
        ("0,,5 * * * *", "minute", 3, "empty list element"),
        ("0, * * * *", "minute", 3, "empty list element"),
        ("1.5 * * * *", "minute", 1, "cannot read '1.5'"),
        ("-5 * * * *", "minute", 1, "cannot read '-5'"),
        ("* * L * MON-", "day-of-week", 9, "cannot read 'MON-'"),
        ("* * * * L", "day-of-week", 9, "L in day-of-week needs a weekday"),
        ("* * 5L * *", "day-of-month", 5, "L stands alone"),
        ("* * W * *", "day-of-month", 5, "W needs a day before it"),
        ("* * 32W * *", "day-of-month", 5, "32 is out of range 1-31"),
        ("* * * * MON#6", "day-of-week", 13, "#6: a weekday occurs 1 to 5 times a month"),
        ("* * * * MON#0", "day-of-week", 13, "#0"),
        ("* * * * MON#", "day-of-week", 13, "'' after # is not a number"),
        ("* * ? * ?", None, None, None),  # valid, checked below
        ("H(5-1) * * * *", "minute", 1, "range H(5-1) is inverted"),
        ("H(0-60) * * * *", "minute", 5, "60 is out of range 0-59"),
        ("? * * * *", "minute", 1, "cannot read '?'"),
        ("٣ * * * *", "minute", 1, "cannot read"),
        ("² * * * *", "minute", 1, "cannot read"),
    ],
)
def test_refusals_name_field_column_and_reason(
    expression: str, field: str | None, column: int | None, reason: str | None
) -> None:
    if reason is None:
        parse_schedule(expression)
        return
    with pytest.raises(ScheduleError) as caught:
        parse_schedule(expression)
    error = caught.value
    assert error.field == field
    assert error.column == column
    assert reason in error.reason
    assert f"{field} field" in str(error)
    assert f"column {column}" in str(error)
    assert expression in str(error)


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("", "expected 5 fields"),
        ("   ", "expected 5 fields"),
        ("* * * *", "got 4"),
        ("* * * * * * *", "got 7"),
        ("@reboot", "unknown macro '@reboot'"),
        ("@every 5", "is not a duration"),
        ("0 0 30 2 *", "can never fire"),
        ("0 0 31 4,6,9,11 *", "can never fire"),
        ("0 0 30,31 2 *", "can never fire"),
        ("0 0 1-5 * *" + " " * 2000, "longer than 1024 characters"),
    ],
)
def test_refusals_of_the_whole_expression(expression: str, reason: str) -> None:
    with pytest.raises(ScheduleError, match="invalid schedule") as caught:
        parse_schedule(expression)
    assert reason in caught.value.reason


def test_rare_but_possible_schedules_are_accepted() -> None:
    assert fires("0 0 29 2 *", 2)[0].startswith("2028-02-29")
    # the fifth Monday of February needs a leap February starting on a Monday: 2044
    assert fires("0 0 * 2 MON#5", 1)[0].startswith("2044-02-29")
    with pytest.raises(ScheduleError, match="can never fire"):
        parse_schedule("0 0 31W 4 *")  # 31W needs a 31st: April has none ...
    assert parse_schedule("0 0 31W 4,5 *").next_after(START) is not None  # ... May does


def test_error_hierarchy() -> None:
    with pytest.raises(ScheduleError) as caught:
        parse_schedule("bad")
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value, InvalidInputError)
    assert isinstance(caught.value, CronwheelError)
    assert not caught.value.retryable


class TestOptions:
    def test_unknown_zone(self) -> None:
        with pytest.raises(ScheduleError, match="unknown time zone 'Mars/Olympus'") as caught:
            parse_schedule("* * * * *", "Mars/Olympus")
        assert caught.value.field == "timezone"

    def test_zone_case_hint(self) -> None:
        with pytest.raises(ScheduleError, match="did you mean 'Europe/Berlin'"):
            parse_schedule("* * * * *", "europe/berlin")

    @pytest.mark.parametrize("zone", ["", "../../etc/passwd", "America", "\0", "x" * 300, "posixrules"])
    def test_malformed_zones(self, zone: str) -> None:
        with pytest.raises(ScheduleError):
            parse_schedule("* * * * *", zone)

    def test_bad_policies(self) -> None:
        with pytest.raises(ScheduleError, match="dst_gap must be"):
            parse_schedule("* * * * *", dst_gap="later")  # type: ignore[arg-type]
        with pytest.raises(ScheduleError, match="dst_fold must be"):
            parse_schedule("* * * * *", dst_fold="middle")  # type: ignore[arg-type]

    def test_non_string_expression(self) -> None:
        with pytest.raises(ScheduleError):
            parse_schedule(5)  # type: ignore[arg-type]

    def test_defaults_follow_cron(self) -> None:
        fixed = parse_schedule("30 2 * * *")
        assert (fixed.wildcard, fixed.dst_gap, fixed.dst_fold) == (False, "shift", "first")
        for expression in ("*/5 * * * *", "0 * * * *", "0 */2 * * *", "* 3 * * *"):
            wild = parse_schedule(expression)
            assert (wild.wildcard, wild.dst_gap, wild.dst_fold) == (True, "skip", "both")

    def test_explicit_policy_wins(self) -> None:
        schedule = parse_schedule("0 * * * *", dst_gap="shift", dst_fold="first")
        assert (schedule.dst_gap, schedule.dst_fold) == ("shift", "first")


class TestNextAfter:
    def test_strictly_after(self) -> None:
        at = parse_schedule("0 12 * * *").next_after(datetime(2026, 1, 1, 12, tzinfo=UTC))
        assert at is not None
        assert at.isoformat() == "2026-01-02T12:00:00+00:00"

    def test_microseconds_before_a_slot(self) -> None:
        at = parse_schedule("0 12 * * *").next_after(datetime(2026, 1, 1, 11, 59, 59, 999999, tzinfo=UTC))
        assert at is not None
        assert at.isoformat() == "2026-01-01T12:00:00+00:00"

    def test_result_is_in_the_schedule_zone(self) -> None:
        at = parse_schedule("0 9 * * *", "Asia/Kolkata").next_after(START)
        assert at is not None
        assert at.isoformat() == "2026-01-01T09:00:00+05:30"

    def test_naive_instant_is_refused(self) -> None:
        with pytest.raises(ValueError, match="timezone-aware"):
            parse_schedule("* * * * *").next_after(datetime(2026, 1, 1))  # noqa: DTZ001

    def test_none_at_the_end_of_time(self) -> None:
        assert parse_schedule("0 0 1 1 *").next_after(datetime(9998, 6, 1, tzinfo=UTC)) is None
        assert (
            parse_schedule("0 0 1 1 *", "Europe/Berlin").next_after(datetime(9998, 6, 1, tzinfo=UTC)) is None
        )

    def test_next_timestamp_matches_next_after(self) -> None:
        schedule = parse_schedule("*/7 3 * * *", "Europe/Berlin")
        at = schedule.next_after(START)
        assert at is not None
        assert schedule.next_timestamp(START.timestamp()) == at.timestamp()

    def test_year_2100_is_not_a_leap_year(self) -> None:
        at = parse_schedule("0 0 29 2 *").next_after(datetime(2097, 1, 1, tzinfo=UTC))
        assert at is not None
        assert at.date().isoformat() == "2104-02-29"


class TestCaching:
    def test_same_arguments_same_object(self) -> None:
        assert parse_schedule("*/5 * * * *", "Europe/Berlin") is parse_schedule(
            "*/5 * * * *", "Europe/Berlin"
        )

    def test_different_zone_different_object(self) -> None:
        berlin = parse_schedule("*/5 * * * *", "Europe/Berlin")
        assert berlin is not parse_schedule("*/5 * * * *", "Europe/Paris")

    def test_fields_are_shared_between_schedules(self) -> None:
        a = parse_cron("*/5 1 * * *")
        b = parse_cron("*/5 2 * * *")
        assert a.minutes is b.minutes

    def test_schedule_is_immutable(self) -> None:
        schedule = parse_cron("* * * * *")
        assert isinstance(schedule, Schedule)
        with pytest.raises(AttributeError):
            schedule.extra = 1  # type: ignore[attr-defined]
        with pytest.raises(AttributeError):
            schedule.expression = "0 0 * * *"  # type: ignore[misc]

"""``@every`` and ``@at``: their fire times against a brute-force reference, their DST behaviour
(none: elapsed time), their words, warnings, gaps and refusals."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import islice, pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cronwheel.schedule import (
    FireKind,
    IntervalSchedule,
    OnceSchedule,
    ScheduleError,
    describe,
    parse_schedule,
)
from cronwheel.schedule.gaps import shortest_gap
from cronwheel.schedule.lint import schedule_warnings

ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata"]
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _duration_text(seconds: int) -> str:
    parts = []
    for unit, size in (("d", 86_400), ("h", 3600), ("m", 60), ("s", 1)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)


def brute_force_interval(every: int, anchor: int | None, after: int, count: int) -> list[int]:
    """The first ``count`` instants after ``after`` that lie a whole number of intervals from the
    anchor (the epoch without one) and not before it, found by walking second by second."""
    base = 0 if anchor is None else anchor
    found: list[int] = []
    instant = after + 1 if anchor is None else max(after + 1, anchor)  # none before the anchor
    while len(found) < count:
        if (instant - base) % every == 0:
            found.append(instant)
        instant += 1
    return found


@settings(max_examples=300, deadline=None)
@given(
    every=st.integers(1, 5_000),
    anchor=st.none() | st.integers(1_600_000_000, 1_900_000_000),
    after=st.integers(1_600_000_000, 1_900_000_000),
    zone=st.sampled_from(ZONES),
)
def test_interval_fires_equal_the_brute_force_reference(
    every: int, anchor: int | None, after: int, zone: str
) -> None:
    text = f"@every {_duration_text(every)}"
    if anchor is not None:
        text += f" from {datetime.fromtimestamp(anchor, UTC).isoformat()}"
    schedule = parse_schedule(text, zone)
    start = datetime.fromtimestamp(after, UTC)
    mine = [int(at.timestamp()) for at in islice(schedule.iter_after(start), 3)]
    assert mine == brute_force_interval(every, anchor, after, 3)
    assert all(
        at.tzinfo is not None and str(at.tzinfo) == zone for at in islice(schedule.iter_after(start), 3)
    )


@settings(max_examples=200, deadline=None)
@given(
    days=st.integers(0, 400),
    hours=st.integers(0, 23),
    minutes=st.integers(0, 59),
    seconds=st.integers(0, 59),
    after=st.datetimes(datetime(1971, 1, 1), datetime(2090, 1, 1), timezones=st.just(UTC)),  # noqa: DTZ001 - bounds are naive
)
def test_long_intervals_are_whole_multiples_of_their_length_from_the_epoch(
    days: int, hours: int, minutes: int, seconds: int, after: datetime
) -> None:
    length = timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
    if length < timedelta(seconds=1):
        return
    schedule = parse_schedule(f"@every {_duration_text(int(length.total_seconds()))}", "Europe/Berlin")
    first, second = (at.astimezone(UTC) for at in islice(schedule.iter_after(after), 2))
    assert second - first == length  # in UTC: aware datetimes of one zone subtract wall times
    assert (first - EPOCH) % length == timedelta(0)
    assert first > after >= first - length


def test_every_24h_is_not_daily_at_03_00_across_dst() -> None:
    after = datetime(2026, 3, 27, 12, tzinfo=UTC)
    interval = parse_schedule("@every 24h from 2026-03-28T03:00:00+01:00", "Europe/Berlin")
    cron = parse_schedule("0 3 * * *", "Europe/Berlin")
    elapsed = [f.at.strftime("%d %H:%M") for f in islice(interval.fires_after(after), 3)]
    wall = [f.at.strftime("%d %H:%M") for f in islice(cron.fires_after(after), 3)]
    assert elapsed == ["28 03:00", "29 04:00", "30 04:00"]  # 24 h after 03:00 CET is 04:00 CEST
    assert wall == ["28 03:00", "29 03:00", "30 03:00"]
    warnings = schedule_warnings(interval, after)
    assert len(warnings) == 1
    assert "DST change on 2026-03-29" in warnings[0]
    assert "'0 3 * * *'" in warnings[0]


def test_fires_in_a_repeated_hour_say_which_pass() -> None:
    schedule = parse_schedule("@every 30m", "America/New_York")
    fires = list(islice(schedule.fires_after(datetime(2026, 11, 1, 5, 10, tzinfo=UTC)), 5))
    assert [(f.at.strftime("%H:%M%z"), f.kind) for f in fires] == [
        ("01:30-0400", FireKind.REPEATED_FIRST),
        ("01:00-0500", FireKind.REPEATED_SECOND),
        ("01:30-0500", FireKind.REPEATED_SECOND),
        ("02:00-0500", FireKind.NORMAL),
        ("02:30-0500", FireKind.NORMAL),
    ]
    instants = [fire.at.astimezone(UTC) for fire in fires]
    assert all(b - a == timedelta(minutes=30) for a, b in pairwise(instants))


def test_the_anchor_is_the_first_fire_and_sets_the_phase() -> None:
    schedule = parse_schedule("@every 1h30m from 2026-01-01T03:00:00+01:00", "Europe/Berlin")
    assert isinstance(schedule, IntervalSchedule)
    assert schedule.next_after(datetime(2025, 6, 1, tzinfo=UTC)) == datetime(2026, 1, 1, 2, tzinfo=UTC)
    assert schedule.next_after(datetime(2026, 1, 1, 2, tzinfo=UTC)) == datetime(2026, 1, 1, 3, 30, tzinfo=UTC)
    assert describe(schedule) == "every 1 hour 30 minutes of elapsed time, from 2026-01-01 03:00:00 CET"
    assert describe(parse_schedule("@every 90s")) == "every 1 minute 30 seconds of elapsed time"
    assert describe(parse_schedule("@EVERY 2d")) == "every 2 days of elapsed time"


def test_at_fires_once_then_never() -> None:
    schedule = parse_schedule("@at 2026-12-24T18:00:00+01:00", "Europe/Berlin")
    assert isinstance(schedule, OnceSchedule)
    at = datetime(2026, 12, 24, 17, tzinfo=UTC)
    assert schedule.next_after(at - timedelta(seconds=1)) == at
    assert schedule.next_after(at) is None
    assert [f.at for f in schedule.fires_after(datetime(2020, 1, 1, tzinfo=UTC))] == [at]
    assert describe(schedule) == "once, at 2026-12-24 18:00:00 CET"
    assert schedule_warnings(schedule, at - timedelta(days=1)) == []
    assert schedule_warnings(schedule, at) == ["2026-12-24T18:00:00+01:00 is past: it has no fire left"]
    assert parse_schedule("@at 2026-12-24T17:00:00Z").next_after(at - timedelta(1)) == at


def test_gaps_of_elapsed_schedules() -> None:
    now = datetime(2026, 3, 1, tzinfo=UTC)
    gap = shortest_gap(parse_schedule("@every 45s", "Europe/Berlin"), now, below=60)
    assert gap is not None
    assert gap.seconds == 45
    assert gap.second - gap.first == timedelta(seconds=45)
    assert shortest_gap(parse_schedule("@every 2m"), now, below=60) is None
    assert shortest_gap(parse_schedule("@at 2026-12-24T18:00:00Z"), now, below=10**6) is None


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("@every", "expected '@every DURATION'"),
        ("@every 0s", "1 s to 3660 days, not 0 s"),
        ("@every 3661d", "1 s to 3660 days"),
        ("@every 90x", "'90x' is not a duration"),
        ("@every 1m1h", "largest first"),
        ("@every -5m", "is not a duration"),
        ("@every 1.5h", "is not a duration"),
        ("@every 1h since 2026-01-01T00:00:00Z", "'@every DURATION from INSTANT'"),
        ("@every 1h from 2026-01-01", "is not an RFC 3339 instant"),
        ("@at 2026-12-24T18:00:00", "has no UTC offset"),
        ("@at 2026-12-24T18:00:00.5Z", "fraction of a second"),
        ("@at 1969-12-31T23:59:59Z", "outside the years 1970"),
        ("@at", "expected '@at INSTANT'"),
        ("@at 2026-12-24T18:00:00Z again", "expected '@at INSTANT'"),
        ("@fortnightly", "known: @yearly"),
    ],
)
def test_refusals_say_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(ScheduleError, match="invalid schedule") as refused:
        parse_schedule(text)
    assert says in str(refused.value)


def test_dst_options_are_refused_with_elapsed_schedules() -> None:
    for text in ("@every 1h", "@at 2026-12-24T18:00:00Z"):
        with pytest.raises(ScheduleError, match="apply to cron schedules, not to @every or @at"):
            parse_schedule(text, dst_gap="skip")
        with pytest.raises(ScheduleError, match="apply to cron schedules"):
            parse_schedule(text, dst_fold="both")


def test_elapsed_schedules_are_cached_and_ignore_the_seed() -> None:
    assert parse_schedule("@every 1h", "UTC", seed="job-1") is parse_schedule(
        "@every 1h", "UTC", seed="job-2"
    )
    with pytest.raises(ScheduleError, match="unknown time zone"):
        parse_schedule("@every 1h", "Mars/Olympus")

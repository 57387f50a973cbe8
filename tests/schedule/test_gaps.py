"""The shortest time between two fires of a schedule (cronwheel.schedule.gaps), DST included:
worked examples, and generated schedules against a walk through their fire times."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cronwheel.schedule import DstFold, DstGap, Schedule, parse_schedule
from cronwheel.schedule.gaps import DST_YEARS, shortest_gap

AFTER = datetime(2026, 1, 5, 12, tzinfo=UTC)
DAY = 86_400

# expression, zone, dst_gap, dst_fold, below, the shortest gap (None: none under `below`)
EXAMPLES: list[tuple[str, str, DstGap | None, DstFold | None, int, int | None]] = [
    ("* * * * * *", "UTC", None, None, 2, 1),
    ("0 * * * * *", "UTC", None, None, 60, None),
    ("0 * * * * *", "UTC", None, None, 61, 60),
    ("0,50 * * * * *", "UTC", None, None, 60, 10),  # the wrap from :50 to the next :00
    ("0,59 0,23 * * *", "UTC", None, None, 3600, 60),  # 23:59, then 00:00 the next day
    ("0,59 0,23 1 * *", "UTC", None, None, 3600, 3540),  # ... but not on consecutive days
    ("0 0 * * MON,TUE", "UTC", None, None, 2 * DAY, DAY),
    ("0 0 * * MON,WED", "UTC", None, None, 2 * DAY, None),
    ("0 0 * * MON,WED", "UTC", None, None, 3 * DAY, 2 * DAY),
    ("0 0 29 2 *", "UTC", None, None, 7 * 86_400, None),
    # New York skips 02:00-03:00 on 2026-03-08 and repeats 01:00-02:00 on 2026-11-01
    ("30 1,3 * * *", "UTC", None, None, 7200, None),
    ("30 1,3 * * *", "America/New_York", None, None, 7200, 3600),
    ("30 2,3 * * *", "America/New_York", "shift", None, 3600, 1800),  # 02:30 fires at 03:00
    ("30 2,3 * * *", "America/New_York", "shift", None, 7200, 1800),  # ... closer than any day's
    ("30 2,3 * * *", "America/New_York", "skip", None, 3600, None),
    ("0,45 1 * * *", "America/New_York", None, "both", 1800, 900),  # 01:45 EDT, 01:00 EST
    ("0,45 1 * * *", "America/New_York", None, "first", 1800, None),
    ("*/10 * * * *", "America/New_York", None, None, 600, None),  # elapsed time across both changes
    ("*/25 * * * *", "Europe/Berlin", None, None, 601, 600),  # :50 to :00, on every day alike
    ("15,45 2 * * *", "Australia/Lord_Howe", "shift", None, 1200, 900),  # a 30-minute DST change
]


@pytest.mark.parametrize(("expression", "zone", "gap", "fold", "below", "expected"), EXAMPLES)
def test_examples(
    expression: str, zone: str, gap: DstGap | None, fold: DstFold | None, below: int, expected: int | None
) -> None:
    schedule = parse_schedule(expression, zone, dst_gap=gap, dst_fold=fold)
    found = shortest_gap(schedule, AFTER, below=below)
    assert (found and found.seconds) == expected
    if found is not None:  # two real consecutive fire times of the schedule, as instants
        first, second = int(found.first.timestamp()), int(found.second.timestamp())
        assert schedule.next_timestamp(first - 1) == first
        assert schedule.next_timestamp(first) == second
        assert second - first == found.seconds


def test_the_dst_example_names_the_night_it_happens() -> None:
    schedule = parse_schedule("30 1,3 * * *", "America/New_York")
    found = shortest_gap(schedule, AFTER, below=7200)
    assert found is not None
    assert (found.first.isoformat(), found.second.isoformat()) == (
        "2026-03-08T01:30:00-05:00",
        "2026-03-08T03:30:00-04:00",
    )


def test_every_second_is_answered_at_once() -> None:
    """86,400 fires a day: the answer comes from the expression, not from walking them."""
    schedule = parse_schedule("* * * * * *", "Europe/Berlin")
    started = datetime.now(UTC)
    found = shortest_gap(schedule, AFTER, below=86_400)
    assert found is not None
    assert found.seconds == 1
    assert datetime.now(UTC) - started < timedelta(seconds=1)


# -- generated schedules against a walk ------------------------------------------------------------


def _walk(schedule: Schedule, after: datetime, days: int) -> int | None:
    """The shortest gap between consecutive fire times in ``days`` from ``after``, by walking."""
    end = after.timestamp() + days * DAY
    fires: list[int] = []
    at = schedule.next_timestamp(after.timestamp())
    while at is not None and at <= end:
        fires.append(at)
        at = schedule.next_timestamp(at)
    return min((b - a for a, b in pairwise(fires)), default=None)


def _values(low: int, high: int, most: int, least_step: int) -> st.SearchStrategy[str]:
    """A list of at most ``most`` values, or a step of at least ``least_step`` (a few fires a
    day, so that walking four years of them stays quick)."""
    listed = st.lists(st.integers(low, high), min_size=1, max_size=most, unique=True)
    return st.one_of(
        listed.map(lambda values: ",".join(map(str, sorted(values)))),
        st.integers(least_step, (high - low + 1) // 2).map(lambda step: f"*/{step}"),
    )


EXPRESSIONS = st.tuples(
    _values(0, 59, 3, 10),
    _values(0, 23, 4, 4),
    st.sampled_from(["*", "*", "1", "1,15", "5-9", "L", "28"]),
    st.sampled_from(["*", "*", "3", "3,11", "10-12"]),
    st.sampled_from(["*", "*", "0", "1-5", "6,0"]),
).map(" ".join)
ZONES = st.sampled_from(
    ["UTC", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "America/Santiago", "Asia/Kolkata"]
)


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(
    expression=EXPRESSIONS,
    zone=ZONES,
    gap=st.sampled_from([None, "shift", "skip"]),
    fold=st.sampled_from([None, "first", "last", "both"]),
    below=st.sampled_from([60, 600, 3600, 7200, DAY, 2 * DAY, 40 * DAY]),
    days=st.integers(0, 365),
)
def test_generated_schedules_agree_with_a_walk_through_their_fires(
    expression: str, zone: str, gap: DstGap | None, fold: DstFold | None, below: int, days: int
) -> None:
    after = AFTER + timedelta(days=days)
    schedule = parse_schedule(expression, zone, dst_gap=gap, dst_fold=fold)
    walked = _walk(schedule, after, DST_YEARS * 365)
    found = shortest_gap(schedule, after, below=below)
    assert (found and found.seconds) == (walked if walked is not None and walked < below else None)

"""The upcoming fires' counts against a brute-force count: every second of the window asked of the
engine alone (is a slot exactly here?), each job on its own, its jitter offset and calendar
applied; grouping, walking and the cap must not change a bucket. Plus the herd, DST days, bounds,
calendars and the cap itself."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta

import pytest

from cronwheel.model import DueJob, FireGroup, MisfirePolicy, Overlap
from cronwheel.schedule import may_hash
from cronwheel.schedule.calendar import CalendarShift, CalendarSpec
from cronwheel.scheduler.planner import due_at, excluded, timeline_of
from cronwheel.scheduler.upcoming import Window, aligned, count, groups_of

SECOND = timedelta(seconds=1)
START = datetime(2026, 3, 2, 11, 59, 30, tzinfo=UTC)


def job(job_id: str, team: str, schedule: str, timezone: str = "UTC", **changes: object) -> DueJob:
    made = DueJob(
        job_id, team, 1, START, schedule, timezone, None, None, MisfirePolicy(), Overlap.FORBID, "default",
        None, None,
    )  # fmt: skip
    return replace(made, **changes)  # type: ignore[arg-type]


def brute(jobs: list[DueJob], window: Window, step: timedelta = SECOND) -> dict[int, Counter[str]]:
    """Each instant (every ``step``: a second, or a minute for schedules of whole minutes) that is
    one of a job's slots (``next_after`` a microsecond before lands exactly there), moved by its
    jitter and counted where it fires."""
    found: dict[int, Counter[str]] = defaultdict(Counter)
    for one in jobs:
        timeline = timeline_of(one)
        moment = window.start - timedelta(seconds=one.jitter_s)
        while moment < window.end:
            slot = timeline.next_after(moment - timedelta(microseconds=1))
            within = (one.start_at is None or moment >= one.start_at) and (
                one.end_at is None or moment <= one.end_at
            )
            if (
                slot is not None
                and slot.astimezone(UTC) == moment
                and within
                and not excluded(timeline, moment)
            ):
                index = window.index(due_at(one, moment))
                if index is not None:
                    found[index][one.team] += 1
            moment += step
    return dict(found)


def counted(jobs: list[DueJob], window: Window) -> dict[int, Counter[str]]:
    return dict(count(groups_of(jobs), window).buckets)


def alone(jobs: list[DueJob]) -> list[FireGroup]:
    """Each job its own group (as the store would answer if no two jobs fired alike)."""
    return [replace(group, id=one.id) for one in jobs for group in groups_of([one])]


MIX = [
    *(job(f"herd-{n}", "ops", "0 * * * *") for n in range(5)),  # the herd at the top of the hour
    job("fives", "data", "*/5 * * * *", "Europe/Berlin"),
    job("seconds", "data", "*/20 * * * * *"),
    job("spread-1", "web", "H * * * *"),
    job("spread-2", "web", "H * * * *"),
    job("jittered", "web", "*/10 * * * *", jitter_s=90.0),
    job("jittered-herd", "web", "0 * * * *", jitter_s=30.0),  # walks with the herd, fires on its own
    # slots 30 s before the window whose jitter moves some of them into it
    *(job(f"before-{n}", "web", "59 11 * * *", jitter_s=59.0) for n in range(4)),
    job("late-start", "data", "*/15 * * * *", start_at=datetime(2026, 3, 2, 12, 20, tzinfo=UTC)),
    job("early-end", "data", "*/15 * * * *", end_at=datetime(2026, 3, 2, 12, 30, tzinfo=UTC)),
    job("once", "ops", "@at 2026-03-02T12:42:17+00:00"),
]


def test_an_hour_per_second_matches_the_brute_force_count_and_the_herd_is_tallest() -> None:
    window = Window(START, timedelta(hours=1), SECOND)
    found = counted(MIX, window)
    assert found == brute(MIX, window)
    tallest = max(found, key=lambda index: sum(found[index].values()))
    assert window.start + tallest * window.bucket == datetime(2026, 3, 2, 12, tzinfo=UTC)
    assert found[tallest]["ops"] == 5
    assert found[tallest]["data"] == 3  # "fives", "seconds" and "early-end" at 12:00:00
    assert count(groups_of(MIX), window).jobs == len(MIX)
    assert sum(found.get(index, Counter())["web"] for index in range(30)) >= 1  # fired in, slot before


def test_a_day_per_minute_over_a_dst_change_matches_the_brute_force_count() -> None:
    """America/New_York springs forward on 2026-03-08: 02:30 does not exist, so the fixed-time job
    fires once when the gap ends (07:00 UTC); a job with `*` in the hour follows elapsed time."""
    jobs = [
        job("gap", "data", "30 2 * * *", "America/New_York"),
        job("hourly", "ops", "0 * * * *", "America/New_York"),
        job("berlin", "web", "0 9 * * *", "Europe/Berlin"),
    ]
    window = Window(datetime(2026, 3, 8, 0, tzinfo=UTC), timedelta(days=1), timedelta(minutes=1))
    found = counted(jobs, window)
    assert found == brute(jobs, window, timedelta(minutes=1))
    minute = (datetime(2026, 3, 8, 7, tzinfo=UTC) - window.start) // window.bucket
    assert found[minute] == Counter({"data": 1, "ops": 1})
    assert sum(teams["ops"] for teams in found.values()) == 24


def test_a_repeated_hour_fires_a_fixed_time_once_at_its_first_pass() -> None:
    """Europe/Berlin falls back on 2026-10-25: 02:30 comes twice; cron fires it at the first."""
    jobs = [job("fold", "data", "30 2 * * *", "Europe/Berlin")]
    window = Window(datetime(2026, 10, 24, 22, tzinfo=UTC), timedelta(days=1), timedelta(minutes=1))
    found = counted(jobs, window)
    assert found == brute(jobs, window, timedelta(minutes=1))
    assert found == {
        (datetime(2026, 10, 25, 0, 30, tzinfo=UTC) - window.start) // window.bucket: Counter({"data": 1})
    }


def test_a_slot_its_calendar_closes_fires_nothing_and_a_shifted_run_fires() -> None:
    closed = CalendarSpec(dates=(date(2026, 3, 3),))
    jobs = [
        job("skipped", "data", "0 9 * * 2", calendar_spec=closed),  # Tuesdays; 2026-03-03 is one
        job("shifted", "ops", "0 9 * * 2", calendar_spec=closed, calendar_shift=CalendarShift.NEXT),
        job("daily", "web", "0 9 * * *", calendar_spec=closed),
    ]
    window = Window(datetime(2026, 3, 3, 0, tzinfo=UTC), timedelta(days=2), timedelta(minutes=60))
    found = counted(jobs, window)
    assert found == brute(jobs, window, timedelta(minutes=1))
    assert found == {33: Counter({"ops": 1, "web": 1})}  # 2026-03-04 09:00: the shifted run, the open day


def test_a_job_firing_more_often_than_the_cap_counts_its_first_fires_and_is_named() -> None:
    jobs = [job("busy", "data", "* * * * * *"), job("calm", "ops", "0 * * * *")]
    window = Window(START, timedelta(hours=1), SECOND)
    upcoming = count(groups_of(jobs), window, cap=100)
    assert upcoming.capped == 1
    assert sum(teams["data"] for teams in upcoming.buckets.values()) == 100
    assert sum(teams["ops"] for teams in upcoming.buckets.values()) == 1


@pytest.mark.parametrize(
    ("now", "bucket", "start"),
    [
        (datetime(2026, 3, 2, 12, 0, 7, 500, tzinfo=UTC), SECOND, datetime(2026, 3, 2, 12, 0, 7, tzinfo=UTC)),
        (
            datetime(2026, 3, 2, 12, 0, 7, tzinfo=UTC),
            timedelta(minutes=1),
            datetime(2026, 3, 2, 12, tzinfo=UTC),
        ),
    ],
)
def test_a_window_starts_at_the_bucket_now_is_in(now: datetime, bucket: timedelta, start: datetime) -> None:
    assert aligned(now, bucket) == start


def test_jobs_that_fire_alike_are_one_group_and_those_whose_fires_are_their_own_alone() -> None:
    groups = groups_of(MIX)
    herd = [group for group in groups if group.schedule == "0 * * * *" and not group.jitter_s]
    assert [(group.team, group.jobs, group.id) for group in herd] == [("ops", 5, None)]
    spread = sorted(group.id or "" for group in groups if group.schedule == "H * * * *")
    assert spread == ["spread-1", "spread-2"]  # H hashes each job's id: two groups of one
    before = [group for group in groups if group.schedule == "59 11 * * *"]
    assert sorted((group.id, group.jobs, group.jitter_s) for group in before) == [
        (f"before-{n}", 1, 59.0) for n in range(4)
    ]  # each jittered job alone: its offsets are its own
    assert sum(group.jobs for group in groups) == len(MIX)
    assert len(groups) == len(MIX) - 4  # the herd of five is one group


def test_the_same_slots_of_two_teams_are_two_groups_walked_once() -> None:
    jobs = [job(f"a-{n}", "ops", "*/5 * * * *") for n in range(3)] + [job("b", "web", "*/5 * * * *")]
    groups = groups_of(jobs)
    assert sorted((group.team, group.jobs) for group in groups) == [("ops", 3), ("web", 1)]
    window = Window(datetime(2026, 3, 2, 12, tzinfo=UTC), timedelta(hours=1), timedelta(minutes=1))
    found = dict(count(groups, window).buckets)
    assert found == brute(jobs, window, timedelta(minutes=1))
    assert found[5] == Counter(ops=3, web=1)  # 12:05


@pytest.mark.parametrize("bucket", [SECOND, timedelta(minutes=1)])
def test_grouping_changes_no_bucket_nor_the_cap(bucket: timedelta) -> None:
    """The groups of a herd (counts above one) count as its jobs one by one would, capped too."""
    herd = [
        *MIX,
        *(job(f"busy-{n}", "data", "*/2 * * * * *") for n in range(3)),
        *(job(f"closed-{n}", "ops", "0 9 * * *", calendar_spec=CalendarSpec(dates=(date(2026, 3, 2),)))
          for n in range(2)),
    ]  # fmt: skip
    window = Window(START, timedelta(hours=1), bucket)
    grouped, each = count(groups_of(herd), window, cap=900), count(alone(herd), window, cap=900)
    assert dict(grouped.buckets) == dict(each.buckets)
    assert (grouped.jobs, grouped.capped) == (each.jobs, each.capped) == (len(herd), 3)


@pytest.mark.parametrize(
    ("expression", "hashes"),
    [
        ("H * * * *", True),
        ("h/5 * * * *", True),
        ("0 9 * * THU", True),  # a name with an h: walked alone, as H would be (the same count)
        ("*/5 * * * *", False),
        ("@hourly", False),  # a macro has no H
        ("@every 6h", False),
        ("@at 2026-03-02T12:00:00+00:00", False),
    ],
)
def test_what_may_hash_its_seed(expression: str, hashes: bool) -> None:
    assert may_hash(expression) is hashes

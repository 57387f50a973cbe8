"""The backfill's pure decisions: the slots of a range, and each step's runs and cursor."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from itertools import count

from hypothesis import given, settings
from hypothesis import strategies as st

from cronwheel.model import (
    Backfill,
    BackfillState,
    CalendarShift,
    CalendarSpec,
    HttpTarget,
    Job,
    Overlap,
    Run,
    RunKind,
    RunState,
)
from cronwheel.scheduler.backfill import slots_in, step

START = datetime(2026, 3, 29, 0, 0, tzinfo=UTC)
JOB = Job(id="j1", team="ops", name="n", schedule="30 1 * * *", target=HttpTarget("https://example.com"))
ids = count()


def new_id() -> str:
    return f"r{next(ids)}"


def day(days: int, hour: int = 1, minute: int = 30) -> datetime:
    return START + timedelta(days=days, hours=hour, minutes=minute)


def backfill(first: datetime, last: datetime, **fields: object) -> Backfill:
    return replace(Backfill("b1", JOB.id, first, last, 0, first), **fields)  # type: ignore[arg-type]


def test_the_slots_of_a_range_are_its_fire_times_within_the_job_s_bounds() -> None:
    assert slots_in(JOB, day(0, 0), day(3, 0), 10) == [day(0), day(1), day(2)]
    assert slots_in(JOB, day(0), day(2), 10) == [day(0), day(1), day(2)]  # both ends included
    assert slots_in(JOB, day(0), day(2), 2) == [day(0), day(1)]
    bounded = replace(JOB, start_at=day(1), end_at=day(1, 2))
    assert slots_in(bounded, day(0, 0), day(3, 0), 10) == [day(1)]


def test_slots_follow_the_job_s_zone_across_a_dst_change() -> None:
    berlin = replace(JOB, schedule="0 9 * * *", timezone="Europe/Berlin")
    saturday, sunday = datetime(2026, 3, 28, tzinfo=UTC), datetime(2026, 3, 29, 23, tzinfo=UTC)
    assert slots_in(berlin, saturday, sunday, 10) == [
        datetime(2026, 3, 28, 8, tzinfo=UTC), datetime(2026, 3, 29, 7, tzinfo=UTC)
    ]  # fmt: skip


def test_a_backfill_makes_no_run_for_a_closed_day_and_one_for_a_shifted_run() -> None:
    closed = CalendarSpec(dates=(day(1).date(),))
    skipping = replace(JOB, calendars=("c",), calendar_spec=closed)
    assert slots_in(skipping, day(0, 0), day(3, 0), 10) == [day(0), day(2)]
    shifted = replace(skipping, calendar_shift=CalendarShift.NEXT)
    assert slots_in(shifted, day(0, 0), day(3, 0), 10) == [day(0), day(2)]  # shifted onto day 2's slot
    earlier = replace(shifted, calendar_shift=CalendarShift.PREVIOUS)
    assert slots_in(earlier, day(0, 0), day(3, 0), 10) == [day(0), day(2)]  # onto day 0's


def test_intervals_and_one_time_jobs_have_their_slots_in_a_range_too() -> None:
    every = replace(JOB, schedule="@every 6h")
    assert slots_in(every, day(0, 0, 0), day(1, 0, 0), 10) == [day(0, h, 0) for h in (0, 6, 12, 18)] + [
        day(1, 0, 0)
    ]
    once = replace(JOB, schedule="@at 2026-03-30T10:00:00+02:00")
    assert slots_in(once, day(0, 0, 0), day(3, 0, 0), 10) == [day(1, 8, 0)]
    assert slots_in(once, day(2, 0, 0), day(3, 0, 0), 10) == []


def test_an_allow_step_takes_the_budget_and_moves_the_cursor_to_the_next_slot() -> None:
    now = day(10)
    taken = step(backfill(day(0, 0), day(4)), JOB, [], now, 2, new_id)
    assert taken is not None
    assert (taken.expected_cursor, taken.next_cursor) == (day(0, 0), day(2))
    assert [(run.slot, run.kind, run.state, run.created_at) for run in taken.runs] == [
        (day(0), RunKind.BACKFILL, RunState.PENDING, now), (day(1), RunKind.BACKFILL, RunState.PENDING, now)
    ]  # fmt: skip
    last = step(backfill(day(0, 0), day(4), cursor=day(4)), JOB, [], now, 2, new_id)
    assert last is not None
    assert ([run.slot for run in last.runs], last.next_cursor) == ([day(4)], None)


def test_forbid_and_replace_take_one_slot_and_only_when_nothing_is_active() -> None:
    active = [Run("r", JOB.id, RunKind.SCHEDULED, day(5), RunState.RUNNING)]
    finished = [replace(active[0], state=RunState.SUCCESS)]
    for overlap in (Overlap.FORBID, Overlap.REPLACE):
        job = replace(JOB, overlap=overlap)
        assert step(backfill(day(0), day(4)), job, active, day(10), 5, new_id) is None
        taken = step(backfill(day(0), day(4)), job, finished, day(10), 5, new_id)
        assert taken is not None
        assert ([run.slot for run in taken.runs], taken.next_cursor) == ([day(0)], day(1))
    allowed = step(backfill(day(0), day(4)), JOB, active, day(10), 5, new_id)
    assert allowed is not None
    assert len(allowed.runs) == 5


def test_nothing_is_taken_without_budget_while_paused_or_once_through() -> None:
    assert step(backfill(day(0), day(4)), JOB, [], day(10), 0, new_id) is None
    assert step(backfill(day(0), day(4)), replace(JOB, paused=True), [], day(10), 5, new_id) is None
    assert step(backfill(day(0), day(4), cursor=None), JOB, [], day(10), 5, new_id) is None
    done = backfill(day(0), day(4), state=BackfillState.DONE)
    assert step(done, JOB, [], day(10), 5, new_id) is None


def test_a_cursor_past_the_last_slot_ends_the_backfill_without_runs() -> None:
    ending = step(backfill(day(0), day(4), cursor=day(4, 2)), JOB, [], day(10), 5, new_id)
    assert ending is not None
    assert (ending.runs, ending.next_cursor) == ((), None)


@settings(max_examples=60, deadline=None)
@given(
    schedule=st.sampled_from(["*/7 * * * *", "0 */3 * * *", "30 1 * * *", "0 9 * * 1-5", "*/20 2-3 * * *"]),
    zone=st.sampled_from(["UTC", "Europe/Berlin", "America/New_York"]),
    span_h=st.integers(1, 24 * 10),
    budgets=st.lists(st.integers(1, 9), min_size=1, max_size=5),
)
def test_steps_take_every_slot_of_the_range_once_in_order(
    schedule: str, zone: str, span_h: int, budgets: list[int]
) -> None:
    """Whatever the budgets of the passes, the steps of a backfill take exactly the range's slots,
    each once, oldest first (across the DST change at the end of March)."""
    job = replace(JOB, schedule=schedule, timezone=zone)
    first, last = (
        datetime(2026, 3, 25, tzinfo=UTC),
        datetime(2026, 3, 25, tzinfo=UTC) + timedelta(hours=span_h),
    )
    expected = slots_in(job, first, last, 100_000)
    current = backfill(first, last)
    taken: list[datetime] = []
    passes = 0
    while current.cursor is not None:
        planned = step(current, job, [], last, budgets[passes % len(budgets)], new_id)
        assert planned is not None
        taken += [run.slot for run in planned.runs]
        current = replace(current, cursor=planned.next_cursor)
        passes += 1
    assert taken == expected

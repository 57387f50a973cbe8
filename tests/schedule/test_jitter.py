"""Jitter offsets (``cronwheel.schedule.jitter``) and the planner's use of them, against a
brute-force reference written here from the documented formula (docs/schedules.md, Jitter):

* the offset is the BLAKE2b digest of ``"{job id}|{slot in Unix microseconds}"`` modulo the
  window in milliseconds: in ``[0, jitter_s)``, the same for the same inputs, spread over the
  window across jobs;
* a window shorter than the schedule's shortest gap keeps the fire times in the slots' order
  (DST changes included), and :func:`~cronwheel.schedule.jitter.too_wide` refuses exactly the
  windows that are not shorter than the gap;
* the planner fires exactly the slots whose fire time has come, each recording it, and measures
  the misfire grace from it.
"""

from __future__ import annotations

import hashlib
import itertools
from datetime import UTC, datetime, timedelta
from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st

from cronwheel.model import HttpTarget, Job, MisfireMode, MisfirePolicy, RunState
from cronwheel.schedule import parse_schedule
from cronwheel.schedule.jitter import MAX_JITTER_S, fire_at, jitter_offset, too_wide
from cronwheel.scheduler.planner import MAX_SLOTS_PER_PLAN, plan

PROPERTIES = settings(derandomize=True, database=None, deadline=None, max_examples=150)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# (expression, zone, shortest gap in seconds, DST changes included)
SCHEDULES = [
    ("@every 2s", "UTC", 2),
    ("@every 90m", "UTC", 5400),
    ("*/10 * * * * *", "UTC", 10),
    ("*/5 * * * *", "Europe/Berlin", 300),
    ("0 * * * *", "America/New_York", 3600),
    ("30 1 * * *", "America/New_York", 82800),  # the spring-forward day is 23 hours long
    ("0 0 1 * *", "UTC", 28 * 86400),
]

job_ids = st.text(alphabet="0123456789abcdef-", min_size=1, max_size=36)
slots = st.integers(min_value=0, max_value=4_000_000_000).map(lambda s: EPOCH + timedelta(seconds=s))
windows = st.floats(min_value=0.001, max_value=MAX_JITTER_S, allow_nan=False)


def reference_offset_ms(job_id: str, slot: datetime, jitter_s: float) -> int:
    """The documented formula, written again: whole milliseconds in [0, window)."""
    window_ms = int(jitter_s * 1000)
    micros = round((slot - EPOCH).total_seconds()) * 1_000_000 + slot.microsecond
    digest = hashlib.blake2b(f"{job_id}|{micros}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % window_ms if window_ms else 0


@PROPERTIES
@given(job_id=job_ids, slot=slots, jitter_s=windows)
def test_the_offset_is_the_documented_hash_within_the_window(
    job_id: str, slot: datetime, jitter_s: float
) -> None:
    offset = jitter_offset(job_id, slot, jitter_s)
    assert offset == timedelta(milliseconds=reference_offset_ms(job_id, slot, jitter_s))
    assert timedelta(0) <= offset < timedelta(seconds=jitter_s)
    assert offset.microseconds % 1000 == 0  # whole milliseconds
    assert jitter_offset(job_id, slot, jitter_s) == offset  # the same inputs, the same offset
    assert fire_at(job_id, slot, jitter_s) == slot + offset


def test_no_window_no_offset() -> None:
    slot = datetime(2026, 12, 7, 10, tzinfo=UTC)
    assert fire_at("job", slot, 0.0) == slot
    assert jitter_offset("job", slot, 0.0) == timedelta(0)
    assert jitter_offset("job", slot, 0.0004) == timedelta(0)  # below a millisecond: none


def test_a_herd_spreads_over_the_window() -> None:
    """A thousand jobs of one slot, a 60 s window: every ten-second part of it gets a good share
    (each expects 167; the bound is far below what a uniform hash could miss)."""
    slot = datetime(2026, 12, 7, 11, tzinfo=UTC)
    offsets = [jitter_offset(f"job-{n}", slot, 60.0).total_seconds() for n in range(1000)]
    parts = [sum(1 for offset in offsets if low <= offset < low + 10) for low in range(0, 60, 10)]
    assert min(parts) > 100
    assert len({round(offset, 3) for offset in offsets}) > 950  # distinct instants, not a few


def test_a_job_s_slots_get_their_own_offsets() -> None:
    start = datetime(2026, 12, 7, tzinfo=UTC)
    offsets = {jitter_offset("job", start + timedelta(hours=n), 600.0) for n in range(100)}
    assert len(offsets) > 90


@PROPERTIES
@given(
    case=st.sampled_from(SCHEDULES),
    job_id=job_ids,
    fraction=st.floats(min_value=0.0, max_value=0.999, allow_nan=False),
    start=st.integers(min_value=1_700_000_000, max_value=1_900_000_000),
)
def test_a_window_below_the_gap_keeps_the_fires_in_order(
    case: tuple[str, str, int], job_id: str, fraction: float, start: int
) -> None:
    expression, zone, gap = case
    schedule = parse_schedule(expression, zone)
    jitter_s = gap * fraction
    after = datetime.fromtimestamp(start, UTC)
    assert too_wide(schedule, jitter_s, after) is None
    fires = [fire.astimezone(UTC) for fire in itertools.islice(schedule.iter_after(after), 60)]
    due = [fire_at(job_id, fire, jitter_s) for fire in fires]
    assert all(first < second for first, second in pairwise(due))
    window = timedelta(seconds=max(jitter_s, 0.001))
    assert all(slot <= moment < slot + window for slot, moment in zip(fires, due, strict=True))


@PROPERTIES
@given(case=st.sampled_from(SCHEDULES), extra=st.floats(min_value=0.0, max_value=3600.0, allow_nan=False))
def test_a_window_as_long_as_the_gap_is_too_wide(case: tuple[str, str, int], extra: float) -> None:
    expression, zone, gap = case
    schedule = parse_schedule(expression, zone)
    after = datetime(2026, 1, 1, tzinfo=UTC)
    found = too_wide(schedule, gap + extra, after)
    assert found is not None
    assert found.seconds <= gap + extra
    assert found.seconds == gap or extra > 0  # exactly the shortest, or one no longer than the window


def test_one_time_schedules_have_no_gap() -> None:
    schedule = parse_schedule("@at 2027-01-01T00:00:00Z", "UTC")
    assert too_wide(schedule, MAX_JITTER_S, datetime(2026, 1, 1, tzinfo=UTC)) is None


# -- the planner ----------------------------------------------------------------------------------


def _job(
    expression: str, zone: str, job_id: str, jitter_s: float, cursor: datetime, misfire: MisfirePolicy
) -> Job:
    return Job(
        id=job_id,
        team="t",
        name="n",
        schedule=expression,
        timezone=zone,
        target=HttpTarget("https://example.com/hook"),
        jitter_s=jitter_s,
        misfire=misfire,
        next_run_at=cursor,
    )


def _walk(
    expression: str, zone: str, cursor: datetime, now: datetime, job_id: str, jitter_s: float
) -> list[datetime]:
    """Brute force: the slots from the cursor on whose reference fire time is at or before now."""
    schedule = parse_schedule(expression, zone, seed=job_id)
    slot, found = cursor, list[datetime]()
    while len(found) < MAX_SLOTS_PER_PLAN:
        due = slot + timedelta(milliseconds=reference_offset_ms(job_id, slot, jitter_s))
        if due > now:
            break
        found.append(slot)
        following = schedule.next_after(slot)
        if following is None:
            break
        slot = following.astimezone(UTC)
    return found


@PROPERTIES
@given(
    case=st.sampled_from(SCHEDULES[:5]),
    job_id=job_ids,
    fraction=st.floats(min_value=0.0, max_value=0.999, allow_nan=False),
    start=st.integers(min_value=1_700_000_000, max_value=1_900_000_000),
    elapsed=st.floats(min_value=-5.0, max_value=4.0, allow_nan=False),
)
def test_the_planner_fires_exactly_the_slots_whose_fire_time_came(
    case: tuple[str, str, int], job_id: str, fraction: float, start: int, elapsed: float
) -> None:
    expression, zone, gap = case
    jitter_s = gap * fraction
    schedule = parse_schedule(expression, zone, seed=job_id)
    first = schedule.next_after(datetime.fromtimestamp(start, UTC))
    assert first is not None
    cursor = first.astimezone(UTC)
    now = cursor + timedelta(seconds=gap * elapsed)  # before the cursor, or a few slots after
    catch_up = MisfirePolicy(MisfireMode.CATCH_UP, max_catch_up=1000)
    job = _job(expression, zone, job_id, jitter_s, cursor, catch_up)
    expected = _walk(expression, zone, cursor, now, job_id, jitter_s)
    counter = itertools.count()
    firing = plan(job, now, [], lambda: f"r{next(counter)}")
    if not expected:
        assert firing is None
        return
    assert firing is not None
    assert [run.slot for run in firing.runs] == expected
    assert all(run.state is RunState.PENDING for run in firing.runs)
    for run in firing.runs:
        offset = timedelta(milliseconds=reference_offset_ms(job_id, run.slot, jitter_s))
        assert run.due_at == (run.slot + offset if jitter_s else None)
        assert run.due <= now
    assert firing.next_run_at is not None
    assert firing.next_run_at == schedule.next_after(expected[-1]).astimezone(UTC)  # type: ignore[union-attr]


@PROPERTIES
@given(job_id=job_ids, late=st.floats(min_value=0.0, max_value=120.0, allow_nan=False))
def test_the_misfire_grace_counts_from_the_fire_time(job_id: str, late: float) -> None:
    slot = datetime(2026, 12, 7, 10, tzinfo=UTC)
    job = _job("0 * * * *", "UTC", job_id, 1800.0, slot, MisfirePolicy(MisfireMode.SKIP, grace_s=60))
    due = fire_at(job_id, slot, 1800.0)
    firing = plan(job, due + timedelta(seconds=late), [], lambda: "r")
    assert firing is not None
    [run] = firing.runs
    assert run.state is (RunState.PENDING if late <= 60 else RunState.SKIPPED)
    assert run.due_at == due

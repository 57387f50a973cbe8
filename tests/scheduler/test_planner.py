"""The planner's decisions, with plain values for ``now`` (no clock, no store)."""

from __future__ import annotations

import dataclasses
import itertools
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from cronwheel.model import (
    DueJob,
    HttpTarget,
    Job,
    MisfireMode,
    MisfirePolicy,
    Overlap,
    Run,
    RunKind,
    RunState,
)
from cronwheel.schedule.jitter import fire_at
from cronwheel.scheduler.planner import MAX_SLOTS_PER_PLAN, arm, first_slot, plan

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def job(**changes: object) -> Job:
    base = Job(
        id="job-1",
        team="t",
        name="n",
        schedule="* * * * *",
        target=HttpTarget("https://example.com/hook"),
        next_run_at=T0,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def decide(j: Job, now: datetime, active: list[Run] | None = None) -> list[tuple[str, str, str | None]]:
    counter = itertools.count(1)
    firing = plan(j, now, active or [], lambda: f"run-{next(counter)}")
    assert firing is not None
    return [(r.slot.strftime("%H:%M:%S"), r.state.value, r.reason) for r in firing.runs]


def test_nothing_due_before_the_cursor() -> None:
    assert plan(job(), T0 - timedelta(seconds=1), [], lambda: "x") is None


def test_on_time_slot_fires_and_cursor_moves_on() -> None:
    firing = plan(job(), T0 + timedelta(milliseconds=300), [], lambda: "r1")
    assert firing is not None
    assert [(r.id, r.state, r.kind, r.slot) for r in firing.runs] == [
        ("r1", RunState.PENDING, RunKind.SCHEDULED, T0)
    ]
    assert firing.expected_next_run_at == T0
    assert firing.next_run_at == T0 + timedelta(minutes=1)
    assert firing.expected_version == 1


def test_paused_and_deleted_jobs_never_fire() -> None:
    assert plan(job(paused=True), T0, [], lambda: "x") is None
    assert plan(job(deleted_at=T0), T0, [], lambda: "x") is None


class TestMisfire:
    def test_skip_fires_within_grace_and_records_the_rest(self) -> None:
        j = job(misfire=MisfirePolicy(MisfireMode.SKIP, grace_s=90))
        got = decide(j, T0 + timedelta(minutes=3, seconds=10))
        assert got == [
            ("12:00:00", "SKIPPED", "misfire"),
            ("12:01:00", "SKIPPED", "misfire"),
            ("12:02:00", "PENDING", None),  # 70 s late: within 90 s of grace
            ("12:03:00", "PENDING", None),
        ]

    def test_run_once_fires_only_the_latest(self) -> None:
        got = decide(job(misfire=MisfirePolicy(MisfireMode.RUN_ONCE)), T0 + timedelta(minutes=2, seconds=5))
        assert got == [
            ("12:00:00", "SKIPPED", "misfire"),
            ("12:01:00", "SKIPPED", "misfire"),
            ("12:02:00", "PENDING", None),
        ]

    def test_catch_up_fires_all_up_to_the_cap(self) -> None:
        got = decide(
            job(misfire=MisfirePolicy(MisfireMode.CATCH_UP, max_catch_up=2)), T0 + timedelta(minutes=3)
        )
        assert got == [
            ("12:00:00", "SKIPPED", "misfire"),
            ("12:01:00", "SKIPPED", "misfire"),
            ("12:02:00", "PENDING", None),
            ("12:03:00", "PENDING", None),
        ]

    def test_a_job_far_behind_is_decided_in_bounded_passes(self) -> None:
        counter = itertools.count()
        firing = plan(job(schedule="* * * * * *"), T0 + timedelta(days=2), [], lambda: str(next(counter)))
        assert firing is not None
        assert len(firing.runs) == MAX_SLOTS_PER_PLAN
        assert firing.next_run_at == T0 + timedelta(seconds=MAX_SLOTS_PER_PLAN)
        assert all(r.state is RunState.SKIPPED for r in firing.runs)


class TestOverlap:
    running = Run("old", "job-1", RunKind.SCHEDULED, T0 - timedelta(minutes=1), RunState.RUNNING)
    done = dataclasses.replace(running, state=RunState.SUCCESS)

    def test_allow_fires_anyway(self) -> None:
        assert decide(job(overlap=Overlap.ALLOW), T0, [self.running]) == [("12:00:00", "PENDING", None)]

    def test_forbid_skips_while_a_run_is_active(self) -> None:
        assert decide(job(overlap=Overlap.FORBID), T0, [self.running]) == [("12:00:00", "SKIPPED", "overlap")]
        assert decide(job(overlap=Overlap.FORBID), T0, [self.done]) == [("12:00:00", "PENDING", None)]

    def test_forbid_within_one_catch_up_pass(self) -> None:
        j = job(overlap=Overlap.FORBID, misfire=MisfirePolicy(MisfireMode.CATCH_UP, max_catch_up=5))
        assert decide(j, T0 + timedelta(minutes=1)) == [
            ("12:00:00", "PENDING", None),
            ("12:01:00", "SKIPPED", "overlap"),
        ]

    def test_replace_cancels_the_active_run(self) -> None:
        firing = plan(job(overlap=Overlap.REPLACE), T0, [self.running, self.done], lambda: "new")
        assert firing is not None
        assert firing.cancel_run_ids == ("old",)
        assert [r.state for r in firing.runs] == [RunState.PENDING]

    def test_replace_keeps_only_the_newest_slot_of_a_pass(self) -> None:
        j = job(overlap=Overlap.REPLACE, misfire=MisfirePolicy(MisfireMode.CATCH_UP, max_catch_up=5))
        assert decide(j, T0 + timedelta(minutes=1)) == [
            ("12:00:00", "SKIPPED", "overlap"),
            ("12:01:00", "PENDING", None),
        ]


class TestWindow:
    def test_end_at_stops_the_cursor(self) -> None:
        firing = plan(job(end_at=T0 + timedelta(seconds=30)), T0, [], lambda: "r")
        assert firing is not None
        assert firing.next_run_at is None

    def test_first_slot_honours_start_at_and_end_at(self) -> None:
        j = job(schedule="0 * * * *", start_at=T0 + timedelta(hours=5))
        assert first_slot(j, T0) == T0 + timedelta(hours=5)  # start_at is itself a slot
        assert first_slot(job(schedule="0 * * * *", end_at=T0 + timedelta(minutes=30)), T0) is None

    def test_first_slot_is_utc_and_respects_the_zone(self) -> None:
        j = job(schedule="30 2 * * *", timezone="America/New_York")
        slot = first_slot(j, datetime(2026, 3, 7, 12, tzinfo=UTC))
        assert slot == datetime(2026, 3, 8, 7, 0, tzinfo=UTC)  # 02:30 skipped: 03:00 EDT
        assert slot is not None
        assert slot.tzinfo is UTC

    def test_hash_uses_the_job_id(self) -> None:
        minutes = set()
        for index in range(20):
            slot = first_slot(job(id=f"job-{index}", schedule="H * * * *"), T0)
            assert slot is not None
            minutes.add(slot.minute)
        assert len(minutes) > 5  # spread over the hour, not all at :00


# -- the one-slot path ------------------------------------------------------------------------------

_FINISHED = Run(
    id="done", job_id="job-1", kind=RunKind.SCHEDULED, slot=T0 - timedelta(hours=1),
    state=RunState.SUCCESS, queue="default", job_version=1,
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    mode=st.sampled_from(list(MisfireMode)),
    grace_s=st.sampled_from([0.0, 0.5, 30.0, 3600.0]),
    max_catch_up=st.integers(0, 3),
    overlap=st.sampled_from(list(Overlap)),
    late_s=st.floats(0, 7200, allow_nan=False),
    end_after_s=st.sampled_from([None, 0.0, 30.0, 90.0]),
    due_job=st.booleans(),
)
def test_the_one_slot_path_decides_as_the_general_one(
    mode: MisfireMode, grace_s: float, max_catch_up: int, overlap: Overlap, late_s: float,
    end_after_s: float | None, due_job: bool,
) -> None:  # fmt: skip
    """``plan`` takes a shortcut when one slot is due and no run is active (a herd); a finished
    run in ``active`` (which the general path ignores, as it ignores every terminal run) forces
    the general path, so both decisions can be compared on the same inputs, for a ``Job`` and
    for the scheduler's slim ``DueJob``."""
    end_at = None if end_after_s is None else T0 + timedelta(seconds=end_after_s)
    policy = MisfirePolicy(mode, grace_s=grace_s, max_catch_up=max_catch_up)
    # hourly: up to 7,200 s late, one to three slots are due
    subject = job(misfire=policy, overlap=overlap, end_at=end_at, schedule="0 * * * *")
    planned: Job | DueJob = DueJob.of(subject) if due_job else subject
    now = T0 + timedelta(seconds=late_s)
    counter = itertools.count(1)
    fast = plan(planned, now, [], lambda: f"run-{next(counter)}")
    counter = itertools.count(1)
    general = plan(planned, now, [_FINISHED], lambda: f"run-{next(counter)}")
    assert fast == general


class TestJitter:
    """A jittered slot is due at its fire time (the slot plus the job's offset for it)."""

    def test_not_due_before_the_fire_time_due_at_it(self) -> None:
        j = job(jitter_s=30.0, schedule="0 * * * *")
        due = fire_at(j.id, T0, 30.0)
        assert due > T0
        assert plan(j, T0, [], lambda: "x") is None  # the slot came; its fire time did not
        assert plan(j, due - timedelta(microseconds=1), [], lambda: "x") is None
        firing = plan(j, due, [], lambda: "r1")
        assert firing is not None
        [run] = firing.runs
        assert (run.slot, run.due_at, run.state) == (T0, due, RunState.PENDING)
        assert firing.next_run_at == T0 + timedelta(hours=1)

    def test_the_misfire_grace_counts_from_the_fire_time(self) -> None:
        j = job(jitter_s=1800.0, schedule="0 * * * *", misfire=MisfirePolicy(MisfireMode.SKIP, grace_s=60))
        due = fire_at(j.id, T0, 1800.0)
        assert due - T0 > timedelta(seconds=61)  # beyond the grace from the slot, within it from due
        assert decide(j, due + timedelta(seconds=60)) == [("12:00:00", "PENDING", None)]
        assert decide(j, due + timedelta(seconds=61)) == [("12:00:00", "SKIPPED", "misfire")]

    def test_arming_records_ahead_of_the_fire_time_only(self) -> None:
        j = job(jitter_s=30.0, schedule="0 * * * *")
        due = fire_at(j.id, T0, 30.0)
        armed = arm(j, T0, lambda: "a1")  # the slot has come, its fire time not: still armable
        assert armed is not None
        assert [(run.slot, run.due_at, run.created_at) for run in armed.runs] == [(T0, due, T0)]
        assert arm(j, due, lambda: "a2") is None  # due now: plan fires it, arming is too late

    def test_without_jitter_a_run_records_no_fire_time(self) -> None:
        firing = plan(job(), T0, [], lambda: "r1")
        assert firing is not None
        assert [(run.due_at, run.due) for run in firing.runs] == [(None, T0)]

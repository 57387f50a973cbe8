"""The chaos judge on synthetic histories: a clean history passes, and each check catches the
violation it exists for. Plus the checker's cron reference against hand-computed fire times."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from chaos_checker import (
    CHECKS,
    TERMINAL,
    Delivery,
    EventRow,
    FaultWindow,
    History,
    JobPlan,
    ManualTrigger,
    Report,
    RunRow,
    Version,
    Window,
    check,
)
from chaos_reference import fires_at, jitter_offset, slots
from croniter import croniter

# -- the reference -------------------------------------------------------------------------------


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def test_reference_elapsed_time() -> None:
    start = utc(2026, 1, 15, 12, 0, 0)
    assert slots("@every 7s", "UTC", start, start + timedelta(seconds=30)) == [
        utc(2026, 1, 15, 12, 0, second)
        for second in (4, 11, 18, 25)  # multiples of 7 s since 1970
    ]
    anchored = "@every 1m from 2026-01-15T13:00:10+01:00"
    assert slots(anchored, "Europe/Berlin", start - timedelta(minutes=5), start + timedelta(minutes=2)) == [
        utc(2026, 1, 15, 12, 0, 10),
        utc(2026, 1, 15, 12, 1, 10),
    ]
    assert fires_at(anchored, "UTC", utc(2026, 1, 15, 12, 3, 10))
    assert not fires_at(anchored, "UTC", utc(2026, 1, 15, 11, 59, 10))  # before the anchor
    once = "@at 2026-01-15T12:00:05Z"
    assert slots(once, "UTC", start, start + timedelta(minutes=1)) == [utc(2026, 1, 15, 12, 0, 5)]
    assert slots(once, "UTC", utc(2026, 1, 15, 12, 0, 5), start + timedelta(minutes=1)) == []
    assert fires_at(once, "UTC", utc(2026, 1, 15, 12, 0, 5))
    assert not fires_at(once, "UTC", utc(2026, 1, 15, 12, 0, 6))
    with pytest.raises(ValueError, match="dialect"):
        slots("@every 1h30m", "UTC", start, start + timedelta(minutes=1))


def test_reference_five_fields_steps_and_exclusive_start() -> None:
    start = utc(2026, 1, 15, 12, 0)
    assert slots("*/15 * * * *", "UTC", start, start + timedelta(hours=1)) == [
        utc(2026, 1, 15, 12, 15),
        utc(2026, 1, 15, 12, 30),
        utc(2026, 1, 15, 12, 45),
        utc(2026, 1, 15, 13, 0),
    ]
    assert [s.minute for s in slots("5/15 * * * *", "UTC", start, start + timedelta(hours=1))] == [
        5,
        20,
        35,
        50,
    ]
    assert [s.minute for s in slots("10-30/10,59 * * * *", "UTC", start, start + timedelta(hours=1))] == [
        10,
        20,
        30,
        59,
    ]


def test_reference_six_fields() -> None:
    start = utc(2026, 1, 15, 12, 0, 0)
    assert slots("*/20 * * * * *", "UTC", start, start + timedelta(minutes=1)) == [
        utc(2026, 1, 15, 12, 0, 20),
        utc(2026, 1, 15, 12, 0, 40),
        utc(2026, 1, 15, 12, 1, 0),
    ]
    assert slots("1/4 30 12 * * *", "UTC", start, start + timedelta(hours=1))[:3] == [
        utc(2026, 1, 15, 12, 30, 1),
        utc(2026, 1, 15, 12, 30, 5),
        utc(2026, 1, 15, 12, 30, 9),
    ]
    assert len(slots("* * * * * *", "UTC", start, start + timedelta(minutes=30))) == 1800


def test_reference_zone_and_names() -> None:
    day = utc(2026, 1, 15)
    # Asia/Kolkata is UTC+05:30: 09:30 local is 04:00 UTC
    assert slots("30 9 * * *", "Asia/Kolkata", day, day + timedelta(days=1)) == [utc(2026, 1, 15, 4, 0)]
    # America/New_York in January is UTC-5: noon local is 17:00 UTC; 2026-01-15 is a Thursday
    week = slots("0 12 * * mon-FRI", "America/New_York", day, day + timedelta(days=7))
    assert [s.day for s in week] == [15, 16, 19, 20, 21]
    assert all(s.hour == 17 for s in week)
    assert slots("0 0 1 jan *", "UTC", utc(2025, 12, 31), utc(2026, 1, 2)) == [utc(2026, 1, 1)]


def test_reference_sunday_is_0_and_7() -> None:
    start, end = utc(2026, 1, 1), utc(2026, 1, 31, 23)
    sundays = [4, 11, 18, 25]
    assert [s.day for s in slots("0 0 * * 0", "UTC", start, end)] == sundays
    assert [s.day for s in slots("0 0 * * 7", "UTC", start, end)] == sundays
    assert [s.day for s in slots("0 0 * * SUN", "UTC", start, end)] == sundays
    assert [s.day for s in slots("0 0 * * 5-7", "UTC", start, end)] == [
        2,
        3,
        4,
        9,
        10,
        11,
        16,
        17,
        18,
        23,
        24,
        25,
        30,
        31,
    ]


def test_reference_day_of_month_or_day_of_week() -> None:
    start, end = utc(2025, 12, 31, 1), utc(2026, 1, 31, 23)
    # both restricted: the 1st (a Thursday) OR any Monday
    assert [s.day for s in slots("0 0 1 * MON", "UTC", start, end)] == [1, 5, 12, 19, 26]
    # day of month starts with '*': both must match, so Mondays with an odd date
    assert [s.day for s in slots("0 0 */2 * MON", "UTC", start, end)] == [5, 19]
    # day of week '*': every day
    assert len(slots("0 0 * * *", "UTC", start, end)) == 31


def test_reference_refuses_dst_windows_and_bad_input() -> None:
    # Europe/Berlin springs forward at 2026-03-29 01:00 UTC
    with pytest.raises(ValueError, match="DST"):
        slots("* * * * *", "Europe/Berlin", utc(2026, 3, 29, 0, 30), utc(2026, 3, 29, 1, 30))
    assert len(slots("* * * * *", "Europe/Berlin", utc(2026, 3, 29, 1, 0), utc(2026, 3, 29, 1, 30))) == 30
    with pytest.raises(ValueError, match="DST"):
        fires_at("0 * * * * *", "Europe/Berlin", utc(2026, 3, 29, 1, 0))
    for bad in ("* * * *", "61 * * * *", "*/0 * * * *", "5-1 * * * *", "0 0 * * FUNDAY", "1-/2 * * * *"):
        with pytest.raises(ValueError, match=r"fields|outside|not a number"):
            slots(bad, "UTC", utc(2026, 1, 1), utc(2026, 1, 1, 1))
    with pytest.raises(ValueError, match="naive"):
        slots("* * * * *", "UTC", datetime(2026, 1, 1), utc(2026, 1, 1, 1))  # noqa: DTZ001


@pytest.mark.parametrize(
    ("expression", "zone"),
    [
        ("*/7 * * * *", "UTC"),
        ("5,35 */3 * * *", "Asia/Tokyo"),
        ("0 9-17 * * 1-5", "America/New_York"),
        ("15 4 1,15 * 3", "Australia/Sydney"),
        ("0 0 * JAN,FEB *", "Europe/Berlin"),
    ],
)
def test_reference_agrees_with_croniter(expression: str, zone: str) -> None:
    tz = ZoneInfo(zone)
    start = datetime(2026, 1, 10, tzinfo=tz)  # weeks clear of any DST change in these zones
    end = start + timedelta(days=8)
    expected = []
    moments = croniter(expression, start)
    while (moment := moments.get_next(datetime)) <= end:
        expected.append(moment.astimezone(UTC))
    assert slots(expression, zone, start, end) == expected


def test_fires_at_agrees_with_slots() -> None:
    rng = random.Random(7)
    start = utc(2026, 1, 15, 12)
    for expression in ("*/3 * * * * *", "1/4 */2 * * * *", "*/5 * * * *", "0 13 * * 4"):
        fired = set(slots(expression, "UTC", start, start + timedelta(hours=2)))
        for _ in range(300):
            moment = start + timedelta(seconds=rng.randrange(1, 7200))
            assert fires_at(expression, "UTC", moment) == (moment in fired)
    assert not fires_at("* * * * * *", "UTC", start + timedelta(microseconds=5))


# -- synthetic histories -------------------------------------------------------------------------

T0 = utc(2026, 1, 15, 12, 0).timestamp()
EVERY_5S = "*/5 * * * * *"


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(T0 + seconds, UTC)


def plan(job_id: str = "job-a", expression: str = EVERY_5S, **changes: object) -> JobPlan:
    """A job created long before the window, live throughout unless ``changes`` say otherwise."""
    job = JobPlan(job_id, shard=1, versions=[Version(expression, "UTC", T0 - 100, None, T0 - 101)])
    return replace(job, **changes)  # type: ignore[arg-type]


PATHS = {
    "SUCCESS": ["PENDING", "RUNNING", "SUCCESS"],
    "FAILED": ["PENDING", "RUNNING", "FAILED"],
    "SKIPPED": ["SKIPPED"],
    "RUNNING": ["PENDING", "RUNNING"],
}


class Recorder:
    """Builds the store's rows and the sink's deliveries the way a healthy cronwheel would."""

    def __init__(self) -> None:
        self.runs: list[RunRow] = []
        self.events: list[EventRow] = []
        self.deliveries: list[Delivery] = []
        self.manual: list[ManualTrigger] = []
        self.count = 0

    def run(
        self,
        job_id: str,
        slot_s: float,
        *,
        state: str = "SUCCESS",
        lateness: float = 0.02,
        deliver: bool = True,
        run_id: str | None = None,
        kind: str = "scheduled",
        reason: str | None = None,
        key: str | None = None,
        epoch: int | None = None,
        path: Sequence[str] | None = None,
        offset: float = 0.0,
    ) -> RunRow:
        """One run of the slot ``slot_s`` (seconds from T0), fired ``offset`` after it (jitter)
        and delivered ``lateness`` after that."""
        self.count += 1
        slot = at(slot_s)
        fired = slot_s + offset
        row = RunRow(
            id=run_id or f"run-{self.count}",
            job_id=job_id,
            kind=kind,
            slot=slot,
            state=state,
            reason=reason,
            attempts=0 if state == "SKIPPED" else 1,
            idempotency_key=key,
            created_at=at(fired + lateness / 2),
            queued_at=None if state == "SKIPPED" else at(fired + lateness / 2),
            finished_at=at(fired + lateness + 0.1),
            epoch=epoch,
        )
        self.runs.append(row)
        self.history_of(row, path or PATHS[state], started=at(fired + lateness * 0.75))
        if deliver and state != "SKIPPED":
            self.deliveries.append(Delivery(row.id, job_id, slot, 1, T0 + fired + lateness, 200))
        return row

    def drop(self, *slots_s: float) -> list[RunRow]:
        """Forget the runs, events and deliveries of these scheduled slots; returns the runs."""
        gone = {at(slot_s) for slot_s in slots_s}
        dropped = [r for r in self.runs if r.kind == "scheduled" and r.slot in gone]
        ids = {r.id for r in dropped}
        self.runs = [r for r in self.runs if r.id not in ids]
        self.events = [e for e in self.events if e.run_id not in ids]
        self.deliveries = [d for d in self.deliveries if d.execution_id not in ids]
        return dropped

    def history_of(self, row: RunRow, states: Sequence[str], started: datetime | None = None) -> None:
        """Events stamped as a healthy cluster stamps them: the record when the run was created,
        each RUNNING at ``started`` (default: the slot), the end when it finished."""
        previous = None
        for state in states:
            when = {"PENDING": row.created_at, "SKIPPED": row.created_at, "RUNNING": started}.get(state)
            if state in TERMINAL and state != "SKIPPED":
                when = row.finished_at
            event = EventRow(len(self.events) + 1, row.id, state, previous, when or row.slot, "node-1")
            self.events.append(event)
            previous = state

    def all_slots(self, job: JobPlan, start: float = 0, end: float = 60, **options: object) -> None:
        for slot in slots(job.versions[-1].expression, "UTC", at(start), at(end)):
            self.run(job.job_id, slot.timestamp() - T0, **options)  # type: ignore[arg-type]

    def history(self, jobs: Sequence[JobPlan], **options: object) -> History:
        return History(
            jobs=jobs,
            deliveries=self.deliveries,
            runs=self.runs,
            events=self.events,
            manual=self.manual,
            window_start=T0,
            window_end=T0 + 60,
            calm_bound_s=0.5,
            **options,  # type: ignore[arg-type]
        )


def only(report: Report, name: str, *also: str) -> list[str]:
    """The messages of check ``name``, after asserting that no other check (but ``also``)
    complained."""
    allowed = {name, *also}
    others = {other: found for other, found in report.violations.items() if other not in allowed and found}
    assert not others, report.summary()
    return [violation.message for violation in report.violations[name]]


def clean() -> tuple[Recorder, JobPlan]:
    job = plan()
    recorder = Recorder()
    recorder.all_slots(job, start=-20, end=70)  # a little history on both sides of the window
    return recorder, job


def test_clean_history_passes() -> None:
    recorder, job = clean()
    other = plan("job-b", "*/10 * * * * *", misfire="run_once", overlap="forbid")
    recorder.all_slots(other, end=60, epoch=4)
    recorder.run("job-a", 33.3, kind="manual", key="k1", run_id="manual-1")
    recorder.manual.append(ManualTrigger("job-a", "k1", ["manual-1", "manual-1"]))
    report = check(recorder.history([job, other]))
    assert report.ok, report.summary()
    assert report.counts.expected_slots == 12 + 6
    assert report.counts.delivered_slots == 18
    assert report.counts.manual == 1
    assert report.lateness_calm.count == 18
    assert report.lateness_calm.max == pytest.approx(0.02)
    assert report.lateness_faulty.count == 0
    assert set(report.to_dict()["violations"]) == set(CHECKS)
    assert "chaos check OK" in report.summary()


def test_missing_slot() -> None:
    recorder, job = clean()
    recorder.drop(25)
    report = check(recorder.history([job]))
    assert only(report, "missed") == ["no delivery and no run record"]
    assert report.violations["missed"][0].slot == at(25)


def test_success_without_delivery_and_calm_failure_are_misses() -> None:
    recorder, job = clean()
    recorder.deliveries = [d for d in recorder.deliveries if d.slot not in (at(25), at(30))]
    recorder.runs = [replace(r, state="FAILED") if r.slot == at(30) else r for r in recorder.runs]
    failed = next(r.id for r in recorder.runs if r.slot == at(30))
    for index, event in enumerate(recorder.events):
        if event.state == "SUCCESS" and event.run_id == failed:
            recorder.events[index] = replace(event, state="FAILED")
    report = check(recorder.history([job]))
    assert only(report, "missed") == ["no delivery and no explained record"] * 2
    assert check(recorder.history([replace(job, expect_failure=True)])).violations["missed"][0].slot == at(25)


def test_skipped_misfire_needs_a_fault_and_the_policy() -> None:
    recorder, job = clean()
    recorder.drop(20, 25)
    for slot in (20, 25):  # recorded 10 s after the slot
        recorder.run("job-a", slot, state="SKIPPED", reason="misfire", lateness=20)
    job = replace(job, grace_s=5.0)
    calm = check(recorder.history([job]))
    assert only(calm, "missed") == ["no delivery and no explained record"] * 2
    outage = [FaultWindow("etcd-quorum", T0 + 18, T0 + 27, None)]
    assert check(recorder.history([job], faults=outage)).ok  # skip: a recorded miss is fine
    # ... unless the record was written within the grace period: the slot should have run
    in_grace = check(recorder.history([replace(job, grace_s=60.0)], faults=outage))
    assert len(only(in_grace, "missed")) == 2
    # run_once: explained when a later slot under the same fault was fired (30 is in recovery)
    assert check(recorder.history([replace(job, misfire="run_once")], faults=outage)).ok
    # catch_up: every missed slot must run (up to max_catch_up, beyond which the oldest skip)
    strict = check(recorder.history([replace(job, misfire="catch_up", max_catch_up=100)], faults=outage))
    assert len(only(strict, "missed")) == 2
    capped = check(recorder.history([replace(job, misfire="catch_up", max_catch_up=2)], faults=outage))
    assert capped.ok, capped.summary()


def test_run_once_collapse_under_faults_that_overlap_is_one_outage() -> None:
    """Seen in a run: slot 20 lay in the recovery of an etcd quorum loss (unbounded) and in a
    PostgreSQL restart (bounded) that began just before; the restart's stall collapsed 20 into 25."""
    recorder, job = clean()
    job = replace(job, misfire="run_once")
    recorder.drop(20)
    recorder.run("job-a", 20, state="SKIPPED", reason="misfire", lateness=6)  # decided at 23
    quorum = FaultWindow("etcd quorum lost", T0 - 15, T0 - 10, None)  # its recovery ends at 20.5
    restart = FaultWindow("restart PostgreSQL", T0 + 18, T0 + 22, 10.0)
    alone = check(recorder.history([job], faults=[quorum], recovery_s=30.5))
    assert only(alone, "missed") == ["no delivery and no explained record"]  # nothing stalled at 20
    assert check(recorder.history([job], faults=[quorum, restart], recovery_s=30.5)).ok


def test_skipped_overlap_only_for_forbid() -> None:
    recorder, job = clean()
    recorder.drop(40)
    recorder.run("job-a", 40, state="SKIPPED", reason="overlap")
    assert len(only(check(recorder.history([job])), "missed")) == 1
    assert check(recorder.history([replace(job, overlap="forbid")])).ok


def test_two_execution_ids_for_one_slot() -> None:
    recorder, job = clean()
    recorder.run("job-a", 15, run_id="twin")
    report = check(recorder.history([job]))
    assert only(report, "doubled") == ["several scheduled runs", "several execution ids delivered"]
    assert "twin" in report.violations["doubled"][1].run_ids
    # the same execution id delivered twice (a re-delivery after a lost answer) is fine
    recorder, job = clean()
    recorder.deliveries.append(replace(recorder.deliveries[3], arrived=recorder.deliveries[3].arrived + 0.3))
    assert check(recorder.history([job])).ok


def test_phantom_after_delete() -> None:
    recorder, job = clean()
    deleted = replace(job, deleted=Window(T0 + 29.9, T0 + 30.5))
    recorder.drop(50, 55, 60, 65, 70)
    report = check(recorder.history([deleted]))
    phantoms = report.violations["phantom"]
    assert (
        only(report, "phantom", "after_stop")
        == ["run after the deletion was acknowledged"] * 3
        + ["delivery after the deletion was acknowledged"] * 3
    )
    assert {v.slot for v in phantoms} == {at(35), at(40), at(45)}
    assert {v.slot for v in report.violations["after_stop"]} == {at(35), at(40), at(45)}
    # the slot at 30 lies in the deletion's ambiguity band: delivered is fine, and so is missing
    recorder.drop(35, 40, 45)
    assert check(recorder.history([deleted])).ok
    recorder.drop(30)
    assert check(recorder.history([deleted])).ok


def test_phantom_in_a_pause_and_ambiguous_edges_both_ways() -> None:
    recorder, job = clean()
    # paused over [20.5, 40.5]; requested at 19.9 (20 is in the band), resumed at 39.8..40.2 (40 too)
    paused = replace(job, paused=[Window(T0 + 19.9, T0 + 20.5, T0 + 39.8, T0 + 40.2)])
    recorder.drop(30, 35)
    recorder.run("job-a", 30, state="SKIPPED", reason="paused")
    report = check(recorder.history([paused]))
    assert only(report, "phantom", "after_stop") == ["run inside a pause", "delivery inside a pause"]
    assert {v.slot for v in report.violations["phantom"]} == {at(25)}
    assert {v.slot for v in report.violations["after_stop"]} == {at(25)}
    # without the run at 25, the pause is clean; the edge slots 20 and 40 ran (tolerated) ...
    recorder.drop(25)
    assert check(recorder.history([paused])).ok
    # ... and they may as well not run
    recorder.drop(20, 40)
    report = check(recorder.history([paused]))
    assert report.ok, report.summary()
    assert report.counts.optional_slots == 5  # 20 to 40: 45 is 4.8 s after the resume's ack
    assert report.counts.expected_slots == 7


def test_phantom_of_an_edited_schedule() -> None:
    recorder = Recorder()
    edited = plan(
        versions=[
            Version(EVERY_5S, "UTC", T0 - 100, T0 + 30.4, T0 - 101),
            Version("*/3 * * * * *", "UTC", T0 + 30.4, None, T0 + 29.5),
        ]
    )
    for slot in (5, 10, 15, 20, 25, 30, 33, 36, 39, 42, 45, 48, 51, 54, 57, 60):
        recorder.run("job-a", slot)
    assert check(recorder.history([edited])).ok  # 30: old definition, in the edit's band
    recorder.run("job-a", 35)
    report = check(recorder.history([edited]))
    assert only(report, "phantom") == [
        "run not a slot of any definition live at that time",
        "delivery not a slot of any definition live at that time",
    ]


def test_late_in_calm_but_allowed_in_a_fault() -> None:
    recorder, job = clean()
    recorder.drop(30)
    recorder.run("job-a", 30, lateness=4.0)
    report = check(recorder.history([job]))
    assert only(report, "late") == [
        "delivered 4.000s late (calm, allowed 0.500s)",
        "released 2.000s late (calm, allowed 0.500s)",
    ]
    assert report.lateness_calm.max == pytest.approx(4.0)
    crash = [FaultWindow("scheduler-kill", T0 + 29, T0 + 31, 6.0)]
    faulty = check(recorder.history([job], faults=crash))
    assert faulty.ok, faulty.summary()
    assert faulty.lateness_faulty.count == 2  # 30 and 35 (the fault's cover ends at 31 + 6)
    assert faulty.lateness_faulty.max == pytest.approx(4.0)
    assert faulty.lateness_calm.max == pytest.approx(0.02)
    short = [FaultWindow("scheduler-kill", T0 + 29, T0 + 31, 3.0)]
    assert len(only(check(recorder.history([job], faults=short)), "late")) == 1
    unbounded = [FaultWindow("etcd-quorum", T0 + 29, T0 + 31, None)]
    exempt = check(recorder.history([job], faults=unbounded))
    assert exempt.ok
    assert exempt.lateness_unbounded.count == 7  # 30 to 60: recovery_s (30) after the fault


def test_queued_stamp_written_late_is_reported_not_judged() -> None:
    """A scheduler stopped between its publish and its queued stamp: the workers started and
    delivered on time, the stamp came 6.27 s after the slot. Not late; the stamp is reported."""
    recorder, job = clean()
    run = recorder.runs[[r.slot for r in recorder.runs].index(at(30))]
    recorder.runs[recorder.runs.index(run)] = replace(run, queued_at=at(36.27))
    report = check(recorder.history([job]))
    assert report.ok, report.summary()
    assert report.queue_lateness_calm.max == pytest.approx(6.27)
    # ... but a release that no evidence shows on time is late: no attempt, no delivery
    recorder.drop(30)
    recorder.run("job-a", 30, lateness=6.27, deliver=False, state="FAILED", path=["PENDING"])
    recorder.runs[-1] = replace(recorder.runs[-1], state="PENDING", attempts=0)
    late = only(check(recorder.history([job], faults=[FaultWindow("kill", T0 + 29, T0 + 30, 1.0)])), "late",
                "missed", "unfinished")  # fmt: skip
    assert late == ["released 3.135s late (bounded, allowed 1.000s)"]
    # ... and one whose first attempt started late, delivered or not, is late too
    recorder.drop(30)
    recorder.run("job-a", 30, lateness=8.0)
    assert only(check(recorder.history([job])), "late") == [
        "delivered 8.000s late (calm, allowed 0.500s)",
        "released 4.000s late (calm, allowed 0.500s)",
    ]


def test_early_delivery_or_start_is_reported_and_queueing_ahead_is_not() -> None:
    recorder, job = clean()
    recorder.deliveries = [
        replace(d, arrived=d.arrived - 1.0) if d.slot == at(10) else d for d in recorder.deliveries
    ]
    assert only(check(recorder.history([job])), "early_start") == [
        "attempt 1 delivered 0.980s before its slot"
    ]
    # under a fault too: nothing is released before its slot, whatever the fault
    faulty = check(recorder.history([job], faults=[FaultWindow("kill", T0 + 5, T0 + 12, 6.0)]))
    assert only(faulty, "early_start") == ["attempt 1 delivered 0.980s before its slot"]
    recorder, job = clean()
    run = recorder.runs[[r.slot for r in recorder.runs].index(at(20))]
    recorder.runs[recorder.runs.index(run)] = replace(run, queued_at=at(19.5))
    recorder.events = [
        replace(e, at=at(19.9)) if e.run_id == run.id and e.state == "RUNNING" else e for e in recorder.events
    ]
    assert only(check(recorder.history([job])), "early_start") == [
        "attempt 1 started 0.100s before its slot"  # queued 0.5 s ahead: released ahead, not early
    ]
    # a stamp within the clock tolerance is not early
    assert check(recorder.history([job], clock_tolerance_s=0.6)).ok


def test_slot_after_a_pause_took_effect_is_never_delivered() -> None:
    """The pause took effect at 24.9 (the API's clock), acknowledged at 26: the slot at 25 lies
    in the pause's band for ``phantom``, but it is after the pause took effect: ``after_stop``."""
    recorder, job = clean()
    window = Window(T0 + 24.0, T0 + 26.0, T0 + 44.0, T0 + 44.5, committed=T0 + 24.9)
    paused = replace(job, paused=[window])
    recorder.drop(30, 35, 40)
    report = check(recorder.history([paused]))
    assert only(report, "after_stop") == ["a slot after the pause took effect delivered"]
    assert [v.slot for v in report.violations["after_stop"]] == [at(25)]
    # took effect after the slot: the run was due while active, and may be delivered later
    assert check(recorder.history([replace(job, paused=[replace(window, committed=T0 + 25.01)])])).ok
    recorder.drop(25)
    assert check(recorder.history([paused])).ok


def test_no_slot_of_a_replaced_schedule_is_delivered_after_the_edit_took_effect() -> None:
    """Every 5 s, then every 3 s from an edit requested at 24.5, in effect at 24.9 and
    acknowledged at 26.5: 25 is in the band for ``phantom`` (acknowledged later), but it is only
    the old schedule's and after the edit took effect."""
    old = Version(EVERY_5S, "UTC", T0 - 100, T0 + 26.5, T0 - 101)
    new = Version("*/3 * * * * *", "UTC", T0 + 26.5, None, T0 + 24.5, committed=T0 + 24.9)
    recorder = Recorder()
    for slot in (5, 10, 15, 20, 25, 27, 30, 33, 36, 39, 42, 45, 48, 51, 54, 57, 60):
        recorder.run("job-a", slot)
    report = check(recorder.history([plan(versions=[old, new])]))
    assert only(report, "after_stop") == ["a slot of the replaced schedule delivered after the edit"]
    assert [v.slot for v in report.violations["after_stop"]] == [at(25)]
    # in effect after 25: the old schedule's slot was due before the edit
    assert check(recorder.history([plan(versions=[old, replace(new, committed=T0 + 25.1)])])).ok
    # a slot both schedules have is the new one's
    both = replace(new, expression="5/10 * * * * *")
    recorder = Recorder()
    for slot in (5, 10, 15, 20, 25, 35, 45, 55):
        recorder.run("job-a", slot)
    assert check(recorder.history([plan(versions=[old, both])])).ok


def test_no_attempt_of_a_deleted_job_starts_after_the_deletion_took_effect() -> None:
    recorder, job = clean()
    recorder.drop(35, 40, 45, 50, 55, 60, 65, 70)
    # slot 30 delivered, attempt started at 30.015: the deletion took effect at 29.9
    deleted = replace(job, deleted=Window(T0 + 29.8, T0 + 31.0, committed=T0 + 29.9))
    report = check(recorder.history([deleted]))
    assert only(report, "after_stop") == ["an attempt started after the deletion took effect"]
    # an attempt that started before the deletion, delivered after it, is fine
    early = replace(deleted, deleted=Window(T0 + 29.8, T0 + 31.0, committed=T0 + 30.02))
    assert check(recorder.history([early])).ok
    # a retry (attempt 2) started after the deletion is not
    run = recorder.runs[[r.slot for r in recorder.runs].index(at(30))]
    recorder.runs[recorder.runs.index(run)] = replace(run, attempts=2)
    recorder.events = [e for e in recorder.events if e.run_id != run.id]
    recorder.history_of(replace(run, attempts=2), ["PENDING", "RUNNING", "RETRYING", "RUNNING", "SUCCESS"],
                        started=at(30.01))  # fmt: skip
    recorder.events[-2] = replace(recorder.events[-2], at=at(31.5))
    recorder.deliveries.append(Delivery(run.id, "job-a", at(30), 2, T0 + 31.6, 200))
    assert only(check(recorder.history([early])), "after_stop") == [
        "an attempt started after the deletion took effect"
    ]


def test_unfinished_run() -> None:
    recorder, job = clean()
    recorder.run("job-a", 75, state="RUNNING")
    assert only(check(recorder.history([job])), "unfinished") == ["scheduled run left RUNNING"]


def test_illegal_transitions() -> None:
    recorder, job = clean()
    recorder.run("job-a", 75, path=["PENDING", "SUCCESS"])
    recorder.run("job-a", 80, path=["RUNNING", "SUCCESS"], state="SUCCESS")
    recorder.run("job-a", 85, path=["PENDING", "RUNNING", "SUCCESS", "RUNNING", "SUCCESS"])
    recorder.run("job-a", 90, path=["PENDING", "FAILED"], state="FAILED", deliver=False)  # cancelled
    recorder.run("job-a", 95, path=["PENDING", "RUNNING", "RETRYING", "RUNNING", "FAILED"], state="SUCCESS")
    row = recorder.run("job-a", 100)
    recorder.events[-2] = replace(recorder.events[-2], previous="RETRYING")
    recorder.events.append(EventRow(999, "ghost", "PENDING", None, at(100)))
    report = check(recorder.history([job]))
    assert only(report, "illegal_transition") == [
        "illegal step PENDING -> SUCCESS",
        "illegal step None -> RUNNING",
        "illegal step SUCCESS -> RUNNING",
        "illegal step PENDING -> FAILED",
        "row state SUCCESS but history ends in FAILED",
        "event says previous RETRYING, history says PENDING",
        "events of a run that has no row",
    ]
    assert report.violations["illegal_transition"][-2].run_ids == (row.id,)
    recorder.runs.append(RunRow("silent", "job-a", "scheduled", at(105), "SUCCESS", attempts=1))
    recorder.deliveries.append(Delivery("silent", "job-a", at(105), 1, T0 + 105.01))
    assert "run has no history" in only(check(recorder.history([job])), "illegal_transition")


def test_retry_and_lost_lease_paths_are_legal() -> None:
    recorder, job = clean()
    recorder.run(
        "job-a", 75, path=["PENDING", "RUNNING", "RETRYING", "RUNNING", "RETRYING", "RUNNING", "SUCCESS"]
    )
    recorder.run("job-a", 80, path=["SKIPPED"], state="SKIPPED", reason="misfire")
    recorder.run("job-a", 85, path=["PENDING", "RUNNING", "RETRYING", "RUNNING", "FAILED"], state="FAILED")
    report = check(recorder.history([job]))
    assert report.ok, report.summary()


def test_epoch_decrease() -> None:
    recorder = Recorder()
    job, other = plan(), plan("job-b")
    for slot, epoch in ((5, 3), (10, 3), (15, 5), (20, 4), (25, 5), (30, 6)):
        recorder.run("job-a", slot, epoch=epoch)
    for slot in range(5, 61, 5):
        recorder.run("job-b", slot, epoch=1 if slot < 50 else None)  # embedded-mode rows are ignored
    for slot in range(35, 61, 5):
        recorder.run("job-a", slot, epoch=6)
    other = replace(other, shard=2)
    report = check(recorder.history([job, other]))
    assert only(report, "stale_epoch") == ["shard 1: epoch 4 written after epoch 5 (run run-3)"]
    assert report.violations["stale_epoch"][0].run_ids == ("run-4", "run-3")
    # on one shard, job-b's epoch-1 rows, created after job-a's epoch 5 and 6, are stale
    shared = check(recorder.history([job, replace(other, shard=1)]))
    assert len(shared.violations["stale_epoch"]) == 1 + 9


def test_manual_trigger_with_two_runs() -> None:
    recorder, job = clean()
    recorder.run("job-a", 33.3, kind="manual", key="k1", run_id="m1")
    recorder.run("job-a", 33.4, kind="manual", key="k1", run_id="m2")
    recorder.manual.append(ManualTrigger("job-a", "k1", ["m1", "m2"]))
    report = check(recorder.history([job]))
    assert only(report, "manual") == ["responses name different runs"]
    recorder.manual[0] = ManualTrigger("job-a", "k1", ["m1", "m1"])
    assert only(check(recorder.history([job])), "manual") == ["2 manual runs for one key"]


def test_manual_trigger_not_delivered_or_unasked() -> None:
    recorder, job = clean()
    recorder.run("job-a", 33.3, kind="manual", key="k1", run_id="m1", deliver=False)
    recorder.manual.append(ManualTrigger("job-a", "k1", ["m1"]))
    recorder.run("job-a", 34.3, kind="manual", key="k2", run_id="m2")
    assert only(check(recorder.history([job])), "manual") == [
        "manual run SUCCESS and never delivered",
        "manual run with key 'k2' nobody asked for",
    ]
    # a trigger whose calls never got an answer may or may not have created its run
    recorder = clean()[0]
    recorder.manual.append(ManualTrigger("job-a", "k3", []))
    assert check(recorder.history([job])).ok


def test_orphan_deliveries() -> None:
    recorder, job = clean()
    recorder.deliveries.append(Delivery("nobody", "job-a", at(10), 1, T0 + 10.3))
    first = recorder.deliveries[0]
    recorder.deliveries.append(replace(first, attempt=2))
    report = check(recorder.history([job]))
    assert report.violations["orphan_delivery"][0].message == "execution id names no run"
    assert report.violations["orphan_delivery"][1].message == "attempt 2 but the row recorded 1"
    # an orphan for a slot that was also delivered under its real run is a second execution id too
    assert [v.run_ids for v in report.violations["doubled"]] == [("nobody", "run-6")]
    assert {name for name, found in report.violations.items() if found} == {"orphan_delivery", "doubled"}


def test_report_serializes() -> None:
    recorder, job = clean()
    recorder.run("job-a", 75, state="RUNNING")
    report = check(recorder.history([job]))
    text = json.dumps(report.to_dict())
    assert '"ok": false' in text
    assert json.loads(text)["violations"]["unfinished"][0]["run_ids"] == ["run-19"]
    assert "unfinished: 1" in report.summary()
    assert "chaos check FAILED" in report.summary()


# -- jitter and calendars ------------------------------------------------------------------------


def test_reference_jitter_offset_is_deterministic_bounded_and_spread() -> None:
    slot = at(10)
    offsets = {jitter_offset(f"job-{n}", slot, 4.0) for n in range(200)}
    assert all(timedelta(0) <= offset < timedelta(seconds=4) for offset in offsets)
    assert len(offsets) > 150  # milliseconds of a 4 s window: 200 jobs rarely share one
    assert jitter_offset("job-7", slot, 4.0) == jitter_offset("job-7", slot, 4.0)
    assert jitter_offset("job-7", slot, 4.0) != jitter_offset("job-7", at(15), 4.0)
    assert jitter_offset("job-7", slot, 0.0) == timedelta(0)


def jittered() -> tuple[Recorder, JobPlan]:
    """A job with 3 s of jitter whose slots are each delivered 0.02 s after their fire time."""
    job = plan(jitter_s=3.0)
    recorder = Recorder()
    for slot in slots(EVERY_5S, "UTC", at(-20), at(70)):
        offset = jitter_offset(job.job_id, slot, 3.0).total_seconds()
        run = recorder.run(job.job_id, slot.timestamp() - T0, offset=offset)
        assert run.slot == slot  # the key stays the slot
    return recorder, job


def test_a_jittered_slot_is_judged_from_its_fire_time() -> None:
    recorder, job = jittered()
    report = check(recorder.history([job]))
    assert report.ok, report.summary()
    assert report.lateness_calm.max == pytest.approx(0.02)  # not the offset: measured from the fire time
    assert report.counts.jittered_slots == 12
    # the same deliveries judged as if unjittered are late
    assert only(check(recorder.history([replace(job, jitter_s=0.0)])), "late")
    # a delivery at the slot itself, before the jittered fire time, is early
    first = at(10)
    offset = jitter_offset(job.job_id, first, 3.0).total_seconds()
    assert offset > 0.1  # (true for this job id and slot; the assertion below needs it)
    recorder.deliveries = [replace(d, arrived=T0 + 10) if d.slot == first else d for d in recorder.deliveries]
    assert only(check(recorder.history([job])), "early_start", "late") == [
        f"attempt 1 delivered {offset:.3f}s before its slot's jittered fire time"
    ]


def test_a_closed_day_is_recorded_skipped_for_the_calendar_and_nothing_runs() -> None:
    closed_day = at(0).date().isoformat()
    job = plan(closed_dates=(closed_day,))
    recorder = Recorder()
    recorder.all_slots(job, start=-20, end=70, state="SKIPPED", reason="calendar")
    report = check(recorder.history([job]))
    assert report.ok, report.summary()
    assert report.counts.expected_slots == 12
    assert report.counts.calendar_skipped == 18  # the window's 12 and those around it
    # an open day's SKIPPED (calendar) record explains nothing: the slot is missed
    assert only(check(recorder.history([replace(job, closed_dates=("2030-01-01",))])), "missed")
    # a closed day's slot that ran is a phantom; one with no record at all is missed
    recorder.drop(10)
    recorder.run(job.job_id, 10)
    assert only(check(recorder.history([job])), "phantom", "missed") == [
        "run on a day its calendars close",
        "delivery on a day its calendars close",
    ]
    recorder.drop(10)
    assert only(check(recorder.history([job])), "missed") == [
        "a slot of a closed day without its SKIPPED (calendar) record"
    ]

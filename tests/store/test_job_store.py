"""The job store contract (``JobReads``, ``JobStore`` and ``Queueing`` of :mod:`cronwheel.store.port`):
jobs and their manual runs, run against every backend in conftest.BACKENDS."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import select

from cronwheel.clock import ManualClock
from cronwheel.errors import (
    ConflictError,
    InvalidInputError,
    NotFoundError,
)
from cronwheel.model import (
    CommandTarget,
    HttpTarget,
    MisfireMode,
    MisfirePolicy,
    Overlap,
    PythonTarget,
    RetryPolicy,
    RunKind,
    RunState,
    Target,
    new_id,
)
from cronwheel.store.port import JobQuery, RunQuery
from cronwheel.store.schema import jobs
from cronwheel.store.sql import SqlStore

from .support import LEASE, START, SUCCESS, TRACEPARENT, at, fire_one, firing_of, make_job, make_run, new_job

TARGETS: list[Target] = [
    HttpTarget(
        "https://example.com/hook",
        method="PUT",
        headers=(("X-B", "2"), ("X-A", "1"), ("X-B", "3")),
        expected_status=(200, 204),
    ),
    CommandTarget(("/bin/sh", "-c", "echo hi"), env=(("Z", "1"), ("A", "2")), cwd="/tmp"),
    CommandTarget(("true",)),
    PythonTarget("pkg.module:function"),
]


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.type)
async def test_create_and_get_round_trip_every_field(store: SqlStore, target: Target) -> None:
    ist = timezone(timedelta(hours=5, minutes=30))
    job = make_job(
        target=target,
        timezone="Asia/Kolkata",
        description="nightly backup",
        dst_gap="skip",
        dst_fold="both",
        payload={"nested": [1, 2.5, None, "x"], "flag": True},
        timeout_s=12.5,
        retry=RetryPolicy(
            max_attempts=4, initial_delay_s=0.5, multiplier=3.0, max_delay_s=60.0, jitter=False
        ),
        misfire=MisfirePolicy(mode=MisfireMode.CATCH_UP, grace_s=5.0, max_catch_up=3),
        overlap=Overlap.REPLACE,
        start_at=datetime(2026, 1, 1, 0, 0, 0, 1, tzinfo=ist),
        end_at=datetime(2027, 1, 1, 23, 59, 59, 999999, tzinfo=UTC),
        paused=True,
        pause_note="maintenance",
        paused_at=datetime(2026, 3, 1, 8, 30, 15, 123456, tzinfo=ist),
        queue="slow",
        labels=(("env", "prod"), ("app", "db")),
        created_at=datetime(2026, 3, 1, 1, 2, 3, 456789, tzinfo=UTC),
        updated_at=datetime(2026, 3, 1, 1, 2, 4, tzinfo=UTC),
        next_run_at=datetime(2026, 3, 2, 17, 30, 0, 654321, tzinfo=ist),
    )
    created = await store.create_job(job)
    fetched = await store.get_job(job.id)
    assert created == job
    assert fetched == job
    for instant in (fetched.start_at, fetched.paused_at, fetched.next_run_at, fetched.created_at):
        assert instant is not None
        assert instant.tzinfo is UTC
    assert fetched.next_run_at == datetime(2026, 3, 2, 12, 0, 0, 654321, tzinfo=UTC)
    assert fetched.target == target
    assert await store.find_job("ops", "backup") == job


async def test_create_fills_missing_timestamps_from_the_clock(store: SqlStore, clock: ManualClock) -> None:
    clock.set(datetime(2026, 5, 5, 5, 5, 5, 5, tzinfo=UTC))
    created = await store.create_job(make_job(created_at=None, updated_at=None))
    assert created.created_at == created.updated_at == clock.now()


async def test_live_names_are_unique_per_team(store: SqlStore) -> None:
    first = await new_job(store)
    with pytest.raises(ConflictError):
        await store.create_job(make_job())
    other_team = await store.create_job(make_job(team="data"))
    assert other_team.name == first.name
    with pytest.raises(ConflictError):  # the same id twice
        await store.create_job(replace(first, name="copy"))
    page = await store.list_jobs(JobQuery())
    assert sorted(job.id for job in page.items) == sorted([first.id, other_team.id])


async def test_name_is_free_again_after_delete(store: SqlStore) -> None:
    first = await new_job(store)
    deleted = await store.delete_job(first.id, at(1))
    assert deleted.deleted_at == at(1)
    again = await store.create_job(make_job())
    assert again.id != first.id
    assert await store.find_job("ops", "backup") == again
    with pytest.raises(NotFoundError):
        await store.get_job(first.id)


async def test_deleted_job_is_invisible_but_its_runs_stay_readable(store: SqlStore) -> None:
    job = await new_job(store)
    run = await fire_one(store, job)
    await store.delete_job(job.id, at(1))
    with pytest.raises(NotFoundError):
        await store.get_job(job.id)
    assert await store.find_job(job.team, job.name) is None
    assert (await store.list_jobs(JobQuery())).items == []
    assert await store.due_jobs(at(100)) == []
    assert await store.get_run(run.id) == run
    assert (await store.list_runs(RunQuery(job_id=job.id))).items == [run]
    assert [event.state for event in await store.list_events(run.id)] == [RunState.PENDING]
    with pytest.raises(NotFoundError):
        await store.delete_job(job.id, at(2))
    with pytest.raises(NotFoundError):
        await store.update_job(job, None)
    with pytest.raises(NotFoundError):
        await store.create_manual_run(make_run(job, at(3), kind=RunKind.MANUAL))


async def test_a_deleted_job_stays_known(store: SqlStore) -> None:
    job = await new_job(store)
    assert await store.job_known(job.id)
    await store.delete_job(job.id, at(1))
    assert await store.job_known(job.id)  # its runs stay readable under its id
    assert not await store.job_known(new_id())


async def test_a_deleted_job_keeps_its_row_but_not_its_secrets(store: SqlStore) -> None:
    """Before, a deleted job kept its header and environment values in its row forever."""
    hook = HttpTarget(
        url="https://admin:HUNTER2@hooks.example.com/x?token=s3cr3t",
        headers=(("Authorization", "Bearer s3cr3t"), ("X-Team", "billing")),
    )
    command = CommandTarget(argv=("/usr/bin/backup", "--full"), env=(("TOKEN", "s3cr3t"),), cwd="/srv")
    http_job = await store.create_job(make_job(name="hook", target=hook))
    command_job = await store.create_job(make_job(name="backup", target=command))
    run = await fire_one(store, http_job)
    await store.delete_job(http_job.id, at(1))
    await store.delete_job(command_job.id, at(1))
    async with store.engine.connect() as connection:
        rows = dict((await connection.execute(select(jobs.c.id, jobs.c.target))).all())
    assert rows[http_job.id] == {
        "type": "http",
        "url": "https://***@hooks.example.com/x?token=***",
        "method": "POST",
        "headers": [["Authorization", "(erased)"], ["X-Team", "(erased)"]],
        "expected_status": [],
    }
    erased_env = [["TOKEN", "(erased)"]]
    assert rows[command_job.id] == {
        "type": "command",
        "argv": ["/usr/bin/backup", "--full"],
        "env": erased_env,
        "cwd": "/srv",
    }
    assert "s3cr3t" not in str(rows)
    assert "HUNTER2" not in str(rows)
    assert await store.get_run(run.id) == run  # the history stays


async def test_delete_of_missing_job_is_not_found(store: SqlStore) -> None:
    with pytest.raises(NotFoundError):
        await store.delete_job(new_id(), START)


async def test_update_bumps_version_and_refuses_a_stale_one(store: SqlStore) -> None:
    job = await new_job(store)
    assert job.version == 1
    v2 = await store.update_job(replace(job, description="two", updated_at=at(1)), expected_version=1)
    assert (v2.version, v2.description, v2.updated_at) == (2, "two", at(1))
    with pytest.raises(ConflictError):
        await store.update_job(replace(job, description="lost"), expected_version=1)
    assert (await store.get_job(job.id)).description == "two"
    v3 = await store.update_job(replace(job, description="three"), expected_version=None)
    assert (v3.version, v3.description) == (3, "three")
    assert v3.created_at == job.created_at
    assert await store.get_job(job.id) == v3


async def test_update_of_missing_job_is_not_found(store: SqlStore) -> None:
    with pytest.raises(NotFoundError):
        await store.update_job(make_job(), None)


async def test_rename_into_a_taken_name_conflicts(store: SqlStore) -> None:
    first = await new_job(store, "a")
    second = await new_job(store, "b")
    with pytest.raises(ConflictError):
        await store.update_job(replace(second, name="a"), expected_version=1)
    assert (await store.get_job(second.id)).version == 1
    renamed = await store.update_job(replace(first, name="c"), expected_version=1)
    assert renamed.name == "c"
    assert (await store.update_job(replace(second, name="a"), expected_version=1)).name == "a"


async def test_update_rewrites_labels_and_filters_follow(store: SqlStore) -> None:
    job = await new_job(store, labels=(("env", "prod"),))
    assert [j.id for j in (await store.list_jobs(JobQuery(labels=(("env", "prod"),)))).items] == [job.id]
    await store.update_job(replace(job, labels=(("env", "dev"),)), None)
    assert (await store.list_jobs(JobQuery(labels=(("env", "prod"),)))).items == []
    assert [j.id for j in (await store.list_jobs(JobQuery(labels=(("env", "dev"),)))).items] == [job.id]


async def test_list_jobs_filters(store: SqlStore) -> None:
    both = await new_job(store, "both", labels=(("env", "prod"), ("app", "db")))
    env_only = await new_job(store, "env-only", labels=(("env", "prod"),), paused=True)
    other_team = await new_job(store, "other", team="data", labels=(("app", "db"),))

    async def ids(**query: object) -> list[str]:
        return [job.id for job in (await store.list_jobs(JobQuery(**query))).items]  # type: ignore[arg-type]

    assert await ids() == sorted([both.id, env_only.id, other_team.id])
    assert await ids(team="ops") == sorted([both.id, env_only.id])
    assert await ids(name="env-only") == [env_only.id]
    assert await ids(paused=True) == [env_only.id]
    assert await ids(paused=False) == sorted([both.id, other_team.id])
    assert await ids(labels=(("env", "prod"),)) == sorted([both.id, env_only.id])
    assert await ids(labels=(("env", "prod"), ("app", "db"))) == [both.id]
    assert await ids(labels=(("env", "prod"), ("app", "web"))) == []
    assert await ids(team="data", labels=(("app", "db"),)) == [other_team.id]


async def test_list_jobs_by_state_of_the_latest_run_by_slot(store: SqlStore) -> None:
    early_pending = await new_job(store, "a", next_run_at=at(10))
    no_runs = await new_job(store, "b")
    late_skipped = await new_job(store, "c", next_run_at=at(10))
    # Job a: a SKIPPED slot at minute 10 is recorded first, then a manual PENDING run at minute 20:
    # the later slot counts, whatever the insertion order. Job c: the other way round.
    await fire_one(store, early_pending, RunState.SKIPPED, reason="misfire")
    await store.create_manual_run(make_run(early_pending, at(20), kind=RunKind.MANUAL))
    await store.create_manual_run(make_run(late_skipped, at(5), kind=RunKind.MANUAL))
    await fire_one(store, late_skipped, RunState.SKIPPED, reason="misfire")

    async def with_last(state: RunState) -> list[str]:
        return [job.id for job in (await store.list_jobs(JobQuery(last_state=state))).items]

    assert await with_last(RunState.PENDING) == [early_pending.id]
    assert await with_last(RunState.SKIPPED) == [late_skipped.id]
    assert await with_last(RunState.RUNNING) == []
    assert no_runs.id not in await with_last(RunState.PENDING)
    last = await store.last_runs([early_pending.id, no_runs.id, late_skipped.id])
    assert set(last) == {early_pending.id, late_skipped.id}
    assert last[early_pending.id].slot == at(20)
    assert last[late_skipped.id].slot == at(10)


async def test_list_jobs_pages_are_stable_under_changes(store: SqlStore) -> None:
    created = [await new_job(store, f"job-{n}") for n in range(7)]
    first = await store.list_jobs(JobQuery(limit=3))
    assert [job.id for job in first.items] == sorted(job.id for job in created)[:3]
    assert first.next_cursor is not None
    await store.delete_job(first.items[0].id, at(1))  # already seen: must not shift the pages
    late = await new_job(store, "late")  # UUIDv7: sorts after every earlier job
    seen = list(first.items)
    cursor: str | None = first.next_cursor
    while cursor is not None:
        page = await store.list_jobs(JobQuery(limit=3, cursor=cursor))
        assert len(page.items) <= 3
        seen.extend(page.items)
        cursor = page.next_cursor
    assert [job.id for job in seen] == [*sorted(job.id for job in created), late.id]


async def test_last_page_has_no_cursor(store: SqlStore) -> None:
    for n in range(6):
        await new_job(store, f"job-{n}")
    first = await store.list_jobs(JobQuery(limit=3))
    second = await store.list_jobs(JobQuery(limit=3, cursor=first.next_cursor))
    assert len(second.items) == 3
    assert second.next_cursor is None


@pytest.mark.parametrize("cursor", ["not base64!", "bm90IGpzb24", "WzFd", "WyJhIiwxXQ"])
async def test_bad_cursors_and_limits_are_refused(store: SqlStore, cursor: str) -> None:
    with pytest.raises(InvalidInputError):
        await store.list_jobs(JobQuery(cursor=cursor))
    with pytest.raises(InvalidInputError):
        await store.list_runs(RunQuery(cursor=cursor))
    with pytest.raises(InvalidInputError):
        await store.list_jobs(JobQuery(limit=0))


async def test_a_manual_runs_trace_context_is_the_first_requests(store: SqlStore) -> None:
    job = await new_job(store)
    first = make_run(job, at(3), kind=RunKind.MANUAL, idempotency_key="k1", traceparent=TRACEPARENT)
    stored, _ = await store.create_manual_run(first)
    assert stored.traceparent == TRACEPARENT
    other = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    again, created = await store.create_manual_run(
        make_run(job, at(4), kind=RunKind.MANUAL, idempotency_key="k1", traceparent=other)
    )
    assert not created
    assert again.traceparent == TRACEPARENT
    assert (await store.get_run(first.id)).traceparent == TRACEPARENT


async def test_update_keeps_the_cursor_unless_told(store: SqlStore) -> None:
    job = await store.create_job(make_job(next_run_at=at(1)))
    kept = await store.update_job(replace(job, description="edited", next_run_at=at(9)), None)
    assert kept.next_run_at == at(1)  # an edit that read the job earlier must not move the cursor back
    moved = await store.update_job(replace(job, next_run_at=at(9)), None, move_cursor=True)
    assert moved.next_run_at == at(9)


async def test_naive_instants_are_refused_and_nothing_is_written(store: SqlStore) -> None:
    naive = datetime(2026, 3, 2, 12, 0)  # noqa: DTZ001 - the point of the test
    with pytest.raises(InvalidInputError):
        await store.create_job(make_job(next_run_at=naive))
    assert await store.find_job("ops", "backup") is None
    job = await new_job(store)
    with pytest.raises(InvalidInputError):
        await store.fire([firing_of(job, make_run(job, naive))], START)
    with pytest.raises(InvalidInputError):  # the cursor's new value
        await store.fire([firing_of(job, make_run(job, START), following=naive)], START)
    with pytest.raises(InvalidInputError):  # the instant of the firing itself
        await store.fire([firing_of(job, make_run(job, START))], naive)
    assert (await store.get_job(job.id)).next_run_at == job.next_run_at
    assert (await store.list_runs(RunQuery(job_id=job.id))).items == []


@pytest.mark.parametrize(
    "instant",
    [
        datetime(2026, 3, 2, 12, 0, 0, 1, tzinfo=UTC),
        datetime(2026, 3, 2, 12, 0, 0, 999999, tzinfo=timezone(timedelta(hours=-9, minutes=-30))),
        datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),  # negative epoch microseconds
        datetime(9999, 12, 30, 23, 59, 59, 999999, tzinfo=UTC),
        datetime(1, 1, 1, 0, 0, 0, 1, tzinfo=UTC),
    ],
)
async def test_instants_round_trip_exactly(store: SqlStore, instant: datetime) -> None:
    job = await new_job(store, next_run_at=instant)
    run = await fire_one(store, job, queued_at=instant)
    stored = await store.get_run(run.id)
    assert stored.slot == instant
    assert stored.queued_at == instant
    assert stored.slot.tzinfo is UTC
    assert stored.slot.microsecond == instant.astimezone(UTC).microsecond
    assert (await store.get_job(job.id)).created_at == START


async def test_resume_job_stores_the_job_and_records_its_paused_slots_at_once(store: SqlStore) -> None:
    job = await new_job(store)
    existing = await fire_one(store, job)  # slot at(0), before the pause
    paused = await store.update_job(
        replace(await store.get_job(job.id), paused=True, paused_at=at(0.5)), None
    )
    skipped = [make_run(paused, at(n), RunState.SKIPPED, reason="paused") for n in range(4)]
    resumed = replace(paused, paused=False, paused_at=None, next_run_at=at(4))

    stored, recorded = await store.resume_job(resumed, paused.version, skipped, at(3.5), move_cursor=True)
    assert (stored.paused, stored.version, stored.next_run_at) == (False, paused.version + 1, at(4))
    assert stored == await store.get_job(job.id)
    assert [run.id for run in recorded] == [run.id for run in skipped[1:]]  # at(0) exists: left alone
    assert recorded[0] == replace(skipped[1], created_at=at(3.5))
    assert await store.get_run(existing.id) == existing
    events = await store.list_events(skipped[3].id)
    assert [(e.previous, e.state, e.at, e.detail) for e in events] == [
        (None, RunState.SKIPPED, at(3.5), "paused")
    ]

    again = await store.update_job(replace(stored, paused=True), None)
    kept, none = await store.resume_job(
        replace(again, paused=False, next_run_at=at(9)), None, [], at(5), move_cursor=False
    )
    assert (kept.paused, kept.next_run_at, none) == (False, at(4), [])  # the cursor stays as stored


async def test_resume_job_refuses_bad_input_and_stale_versions_whole(store: SqlStore) -> None:
    job = await new_job(store, paused=True)
    other = await new_job(store, "other")
    slot = make_run(job, at(1), RunState.SKIPPED, reason="paused")
    resumed = replace(job, paused=False)
    refused = [
        (replace(job, description="still paused"), job.version, [slot], InvalidInputError),
        (resumed, job.version, [make_run(job, at(1))], InvalidInputError),  # not SKIPPED
        (resumed, job.version, [make_run(other, at(1), RunState.SKIPPED)], InvalidInputError),
        (resumed, job.version + 1, [slot], ConflictError),
        (replace(resumed, name="other"), job.version, [slot], ConflictError),  # the name is taken
        (replace(resumed, id=new_id()), None, [], NotFoundError),
    ]
    for candidate, version, runs, error in refused:
        with pytest.raises(error):
            await store.resume_job(candidate, version, runs, at(2), move_cursor=True)
    assert await store.get_job(job.id) == job  # nothing written
    assert (await store.list_runs(RunQuery())).items == []


async def test_delete_job_with_cancel_active_flags_its_unfinished_runs_at_once(store: SqlStore) -> None:
    job = await new_job(store)
    done = await fire_one(store, job)
    assert await store.claim_run(done.id, "w1", START, START + LEASE) is not None
    assert await store.finish_attempt(done.id, 1, "w1", SUCCESS, START, None) is not None
    running = await fire_one(store, await store.get_job(job.id))
    assert await store.claim_run(running.id, "w1", running.slot, running.slot + LEASE) is not None
    pending = await fire_one(store, await store.get_job(job.id))
    kept = await new_job(store, "kept")
    kept_run = await fire_one(store, kept)

    await store.delete_job(kept.id, at(3))  # without cancel_active: no flags
    assert await store.cancel_requested([kept_run.id]) == set()
    deleted = await store.delete_job(job.id, at(3), cancel_active=True)
    assert (deleted.deleted_at, deleted.version) == (at(3), job.version + 1)
    assert await store.cancel_requested([done.id, running.id, pending.id]) == {running.id, pending.id}
    assert [e.state for e in await store.list_events(pending.id)] == [RunState.PENDING]  # a flag, no event
    with pytest.raises(NotFoundError):
        await store.delete_job(job.id, at(4), cancel_active=True)


async def test_manual_run_is_idempotent_by_key(store: SqlStore) -> None:
    job = await new_job(store)
    first = make_run(job, at(3), kind=RunKind.MANUAL, idempotency_key="k1", payload=None, has_payload=True)
    stored, created = await store.create_manual_run(first)
    assert created
    assert stored == replace(first, created_at=START)
    assert stored.has_payload
    assert stored.payload is None
    again, created = await store.create_manual_run(
        make_run(job, at(4), kind=RunKind.MANUAL, idempotency_key="k1")
    )
    assert not created
    assert again == stored
    third, created = await store.create_manual_run(
        make_run(job, at(3), kind=RunKind.MANUAL, idempotency_key="k2")
    )
    assert created
    fourth, created = await store.create_manual_run(make_run(job, at(3), kind=RunKind.MANUAL, payload=[1]))
    fifth, created_too = await store.create_manual_run(make_run(job, at(3), kind=RunKind.MANUAL))
    assert created
    assert created_too
    assert fourth.payload == [1]
    runs = (await store.list_runs(RunQuery(job_id=job.id))).items
    assert {run.id for run in runs} == {stored.id, third.id, fourth.id, fifth.id}
    assert [e.state for e in await store.list_events(stored.id)] == [RunState.PENDING]


async def test_manual_run_for_a_missing_job_is_not_found(store: SqlStore) -> None:
    with pytest.raises(NotFoundError):
        await store.create_manual_run(make_run(make_job(), START, kind=RunKind.MANUAL))


async def test_get_jobs_reads_the_live_jobs_of_many_ids(store: SqlStore) -> None:
    kept, gone = await new_job(store, name="kept"), await new_job(store, name="gone")
    await store.delete_job(gone.id, START)
    found = await store.get_jobs([kept.id, gone.id, new_id(), kept.id])
    assert found == {kept.id: await store.get_job(kept.id)}
    assert await store.get_jobs([]) == {}


async def test_request_cancel_marks_only_unfinished_runs(store: SqlStore) -> None:
    job = await new_job(store)
    done = await fire_one(store, job)
    await store.claim_run(done.id, "w", START, START + LEASE)
    await store.finish_attempt(done.id, 1, "w", SUCCESS, START, None)
    job = await store.get_job(job.id)
    pending = await fire_one(store, job)
    job = await store.get_job(job.id)
    untouched = await fire_one(store, job)
    assert await store.cancel_requested([done.id, pending.id, untouched.id]) == set()
    await store.request_cancel([done.id, pending.id, new_id()], at(1))
    assert (await store.get_run(pending.id)).cancel_requested
    assert not (await store.get_run(done.id)).cancel_requested
    assert await store.cancel_requested([done.id, pending.id, untouched.id, new_id()]) == {pending.id}
    assert await store.cancel_requested([]) == set()

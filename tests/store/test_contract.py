"""The Store contract (cronwheel.store.port), run against every backend in conftest.BACKENDS."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import select

from cronwheel.clock import ManualClock
from cronwheel.errors import (
    BackendUnavailableError,
    ConflictError,
    InvalidInputError,
    NotFoundError,
    RaceLostError,
)
from cronwheel.model import (
    LEGAL_TRANSITIONS,
    AttemptResult,
    CommandTarget,
    DueJob,
    Finish,
    HttpTarget,
    Job,
    MisfireMode,
    MisfirePolicy,
    Outcome,
    Overlap,
    PythonTarget,
    RetryPolicy,
    Run,
    RunKind,
    RunState,
    Target,
    new_id,
    shard_of,
)
from cronwheel.store import sql
from cronwheel.store.port import MAX_LOST_ATTEMPTS, JobQuery, RunQuery
from cronwheel.store.schema import jobs
from cronwheel.store.sql import SqlStore, open_store

from .conftest import BACKENDS
from .support import LEASE, START, at, fire_one, firing_of, make_job, make_run, new_job

SUCCESS = AttemptResult(Outcome.SUCCESS, status_code=200, output="ok")
FAILURE = AttemptResult(Outcome.FAILURE, status_code=500, error="HTTP 500", output="boom", retry_after_s=7.5)

# -- jobs ----------------------------------------------------------------------------------------

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


async def test_due_jobs(store: SqlStore) -> None:
    second = await new_job(store, "second", next_run_at=at(2))
    first = await new_job(store, "first", next_run_at=at(1))
    await new_job(store, "later", next_run_at=at(10))
    await new_job(store, "never", next_run_at=None)
    await new_job(store, "paused", next_run_at=at(0), paused=True)
    deleted = await new_job(store, "deleted", next_run_at=at(0))
    await store.delete_job(deleted.id, START)
    assert [job.id for job in await store.due_jobs(at(5))] == [first.id, second.id]
    assert [job.id for job in await store.due_jobs(at(2))] == [first.id, second.id]  # inclusive
    assert [job.id for job in await store.due_jobs(at(5), limit=1)] == [first.id]
    assert first.next_run_at is not None
    paged = await store.due_jobs(at(5), limit=1, after=(first.next_run_at, first.id))
    assert [job.id for job in paged] == [second.id]
    in_second_shard = [job.id for job in (first, second) if shard_of(job.id) == shard_of(second.id)]
    assert [job.id for job in await store.due_jobs(at(5), shards=[shard_of(second.id)])] == in_second_shard
    others = [shard for shard in range(256) if shard not in (shard_of(first.id), shard_of(second.id))]
    assert await store.due_jobs(at(5), shards=others) == []
    assert await store.due_jobs(at(5), shards=[]) == []
    assert await store.due_jobs(at(0.5)) == []

    ties = sorted([(await new_job(store, f"tie-{n}", next_run_at=at(3))).id for n in range(3)])
    seen: list[DueJob] = []
    while page := await store.due_jobs(
        at(5), limit=2, after=(seen[-1].next_run_at or at(0), seen[-1].id) if seen else None
    ):
        seen += page
    assert [job.id for job in seen] == [first.id, second.id, *ties]  # ties in id order, none twice


async def test_due_jobs_are_the_jobs_slim_view(store: SqlStore) -> None:
    """What the scheduler reads of a due job equals the job's own fields (every policy and
    option the planner uses), shared texts and policies interned or not."""
    edge = MisfirePolicy(MisfireMode.CATCH_UP, grace_s=12.5, max_catch_up=3)
    made = [
        await new_job(store, "plain", next_run_at=at(1)),
        await new_job(
            store,
            "options",
            next_run_at=at(2),
            timezone="Europe/Paris",
            dst_gap="skip",
            dst_fold="both",
            misfire=edge,
            overlap=Overlap.REPLACE,
            queue="batch",
            start_at=at(0),
            end_at=at(99),
        ),
    ]
    due = await store.due_jobs(at(5))
    assert due == [DueJob.of(await store.get_job(job.id)) for job in made]
    assert (due[1].misfire, due[1].timezone, due[1].queue) == (edge, "Europe/Paris", "batch")


# -- firing --------------------------------------------------------------------------------------


async def test_fire_records_runs_and_moves_the_cursor(store: SqlStore) -> None:
    job = await new_job(store)
    pending = make_run(job, at(0))
    skipped = make_run(job, at(-1), RunState.SKIPPED, reason="misfire")
    result = await store.fire([firing_of(job, skipped, pending, following=at(1))], at(0.5))
    assert [run.id for run in result.accepted] == [pending.id]
    assert [run.id for run in result.skipped] == [skipped.id]
    assert result.stale_job_ids == []
    assert result.accepted[0] == replace(pending, created_at=at(0.5))
    stored = await store.get_job(job.id)
    assert stored.next_run_at == at(1)
    assert stored.version == job.version  # firing is not an edit
    assert await store.get_run(pending.id) == result.accepted[0]
    assert (await store.get_run(skipped.id)).reason == "misfire"
    events = await store.list_events(skipped.id)
    assert [(e.previous, e.state, e.at, e.detail) for e in events] == [
        (None, RunState.SKIPPED, at(0.5), "misfire")
    ]


TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


async def test_a_runs_trace_context_is_kept_from_fire_to_claim(store: SqlStore) -> None:
    job = await new_job(store)
    traced = make_run(job, at(0), traceparent=TRACEPARENT)
    plain = make_run(job, at(1))
    result = await store.fire([firing_of(job, traced, following=at(1))], at(0.5))
    assert result.accepted[0].traceparent == TRACEPARENT
    await store.fire([firing_of(replace(job, next_run_at=at(1)), plain, following=at(2))], at(1.5))
    assert (await store.get_run(traced.id)).traceparent == TRACEPARENT
    assert (await store.get_run(plain.id)).traceparent is None  # tracing off: nothing recorded
    claimed = await store.claim_runs([traced.id, plain.id], "w1", at(2), at(2) + LEASE)
    assert {run_id: run.traceparent for run_id, run in claimed.items()} == {
        traced.id: TRACEPARENT,
        plain.id: None,
    }
    assert [run.traceparent for run in (await store.list_runs(RunQuery(job_id=job.id))).items] == [
        None,
        TRACEPARENT,
    ]


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


@pytest.mark.parametrize("change", ["version", "cursor", "deleted", "missing"])
async def test_stale_firing_writes_nothing(store: SqlStore, change: str) -> None:
    job = await new_job(store)
    run = make_run(job, at(0))
    firing = firing_of(job, run)
    if change == "version":
        await store.update_job(replace(job, description="edited"), None)
    elif change == "cursor":
        await store.update_job(replace(job, next_run_at=at(5)), None, move_cursor=True)
        firing = replace(firing, expected_version=2)
    elif change == "deleted":
        await store.delete_job(job.id, START)
    else:
        firing = replace(firing, job_id=new_id(), runs=())
    before = (await store.list_jobs(JobQuery())).items
    result = await store.fire([firing], at(0))
    assert result.stale_job_ids == [firing.job_id]
    assert result.accepted == result.skipped == []
    with pytest.raises(NotFoundError):
        await store.get_run(run.id)
    assert (await store.list_jobs(JobQuery())).items == before


async def test_fire_compares_a_null_cursor_as_a_value(store: SqlStore) -> None:
    idle = await new_job(store, "idle", next_run_at=None)
    busy = await new_job(store, "busy", next_run_at=at(0))
    result = await store.fire(
        [
            firing_of(busy, expected_next_run_at=None, next_run_at=at(1)),
            firing_of(idle, expected_next_run_at=at(0), next_run_at=at(1)),
        ],
        START,
    )
    assert sorted(result.stale_job_ids) == sorted([busy.id, idle.id])
    result = await store.fire([firing_of(idle, expected_next_run_at=None, next_run_at=at(3))], START)
    assert result.stale_job_ids == []
    assert (await store.get_job(idle.id)).next_run_at == at(3)
    result = await store.fire([firing_of(busy, next_run_at=None)], START)
    assert result.stale_job_ids == []
    assert (await store.get_job(busy.id)).next_run_at is None


async def test_a_slot_is_never_recorded_twice(store: SqlStore) -> None:
    job = await new_job(store)
    first = await fire_one(store, job)
    job = await store.get_job(job.id)
    again = make_run(job, first.slot)  # same slot, new run id
    fresh = make_run(job, at(1))
    result = await store.fire([firing_of(job, again, fresh)], START)
    assert [run.id for run in result.accepted] == [fresh.id]  # "already exists" is not an error
    assert result.stale_job_ids == []
    assert (await store.get_job(job.id)).next_run_at == at(2)
    runs = (await store.list_runs(RunQuery(job_id=job.id))).items
    assert sorted(run.id for run in runs) == sorted([first.id, fresh.id])
    with pytest.raises(NotFoundError):
        await store.list_events(again.id)


async def test_fire_batch_applies_each_firing_on_its_own(store: SqlStore) -> None:
    fresh = await new_job(store, "fresh")
    moved = await new_job(store, "moved")
    await store.update_job(replace(moved, description="edited"), None)
    fresh_run, moved_run = make_run(fresh, at(0)), make_run(moved, at(0))
    result = await store.fire([firing_of(moved, moved_run), firing_of(fresh, fresh_run)], START)
    assert [run.id for run in result.accepted] == [fresh_run.id]
    assert result.stale_job_ids == [moved.id]
    with pytest.raises(NotFoundError):
        await store.get_run(moved_run.id)


async def test_firings_of_one_job_in_one_batch_apply_in_order(store: SqlStore) -> None:
    job = await new_job(store)
    one, two = make_run(job, at(0)), make_run(job, at(1))
    first = firing_of(job, one, following=at(1))
    second = firing_of(job, two, expected_next_run_at=at(1), following=at(2))
    repeat = firing_of(job, make_run(job, at(0)), following=at(1))  # stale once `first` applied
    result = await store.fire([first, second, repeat], START)
    assert [run.id for run in result.accepted] == [one.id, two.id]
    assert result.stale_job_ids == [job.id]
    assert (await store.get_job(job.id)).next_run_at == at(2)


async def test_many_firings_in_one_batch(store: SqlStore) -> None:
    jobs = [await new_job(store, f"job-{n}") for n in range(30)]
    runs = [make_run(job, at(0)) for job in jobs]
    stale = jobs[::7]
    for job in stale:
        await store.update_job(replace(job, description="edited"), None)
    result = await store.fire([firing_of(job, run) for job, run in zip(jobs, runs, strict=True)], START)
    assert sorted(result.stale_job_ids) == sorted(job.id for job in stale)
    assert len(result.accepted) == len(jobs) - len(stale)
    assert [j.id for j in await store.due_jobs(at(0))] == sorted(j.id for j in stale)


async def test_concurrent_fire_of_one_slot_records_one_run(store: SqlStore) -> None:
    job = await new_job(store)
    firings = [firing_of(job, make_run(job, at(0))) for _ in range(12)]
    results = await asyncio.gather(*(store.fire([firing], START) for firing in firings))
    winners = [result for result in results if result.accepted]
    assert len(winners) == 1
    assert all(result.stale_job_ids == [job.id] for result in results if not result.accepted)
    runs = (await store.list_runs(RunQuery(job_id=job.id))).items
    assert [run.id for run in runs] == [winners[0].accepted[0].id]
    assert len(await store.list_events(runs[0].id)) == 1


async def test_two_stores_on_one_database_record_one_run_per_slot(store: SqlStore, store_url: str) -> None:
    """Two schedulers that both believe they own the shard: the store decides."""
    other = await open_store(store_url)
    try:
        jobs = [await new_job(store, f"job-{n}") for n in range(4)]
        calls = [
            (side, firing_of(job, make_run(job, at(0))))
            for job in jobs
            for side in (store, other, store, other, store, other)
        ]
        results = await asyncio.gather(*(side.fire([firing], START) for side, firing in calls))
        accepted = [run for result in results for run in result.accepted]
        assert sorted(run.job_id for run in accepted) == sorted(job.id for job in jobs)
        assert sum(len(result.stale_job_ids) for result in results) == len(calls) - len(jobs)
        assert len((await other.list_runs(RunQuery())).items) == len(jobs)
    finally:
        await other.close()


async def test_fire_refuses_runs_that_are_not_new(store: SqlStore) -> None:
    job = await new_job(store)
    with pytest.raises(InvalidInputError):
        await store.fire([firing_of(job, make_run(job, at(0), RunState.RUNNING))], START)
    other = make_job("other")
    with pytest.raises(InvalidInputError):
        await store.fire([firing_of(job, make_run(other, at(0)))], START)
    assert (await store.get_job(job.id)).next_run_at == job.next_run_at
    assert (await store.list_runs(RunQuery())).items == []


async def test_fire_requests_cancel_of_the_replaced_runs(store: SqlStore) -> None:
    job = await new_job(store)
    old = await fire_one(store, job)
    await store.claim_run(old.id, "w1", START, START + LEASE)
    job = await store.get_job(job.id)
    stale_cancel = firing_of(job, make_run(job, at(1)), expected_version=99, cancel_run_ids=(old.id,))
    await store.fire([stale_cancel], START)
    assert not (await store.get_run(old.id)).cancel_requested
    result = await store.fire([firing_of(job, make_run(job, at(1)), cancel_run_ids=(old.id,))], START)
    assert result.accepted
    beat = await store.heartbeat(old.id, 1, "w1", START + 2 * LEASE)
    assert beat is not None
    assert beat.cancel_requested


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


async def test_record_skipped_inserts_only_new_slots(store: SqlStore) -> None:
    job = await new_job(store)
    existing = await fire_one(store, job)  # slot at(0), PENDING
    skipped = [make_run(job, at(n), RunState.SKIPPED, reason="paused") for n in range(3)]
    recorded = await store.record_skipped(skipped, at(5))
    assert [run.id for run in recorded] == [skipped[1].id, skipped[2].id]
    assert recorded[0] == replace(skipped[1], created_at=at(5))
    assert await store.get_run(existing.id) == existing
    events = await store.list_events(skipped[2].id)
    assert [(e.previous, e.state, e.at, e.detail) for e in events] == [
        (None, RunState.SKIPPED, at(5), "paused")
    ]
    assert await store.record_skipped(skipped, at(6)) == []
    assert (await store.get_job(job.id)).next_run_at == at(1)  # the cursor is not touched
    with pytest.raises(InvalidInputError):
        await store.record_skipped([make_run(job, at(9))], at(6))
    with pytest.raises(NotFoundError):
        await store.record_skipped([make_run(make_job("ghost"), at(9), RunState.SKIPPED)], at(6))


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


# -- manual runs ---------------------------------------------------------------------------------


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


# -- workers -------------------------------------------------------------------------------------


async def test_claim_starts_an_attempt(store: SqlStore) -> None:
    job = await new_job(store)
    run = await fire_one(store, job)
    claimed = await store.claim_run(run.id, "w1", at(1), at(1) + LEASE)
    assert claimed is not None
    assert (claimed.state, claimed.attempts, claimed.lease_owner) == (RunState.RUNNING, 1, "w1")
    assert (claimed.lease_expires_at, claimed.started_at) == (at(1) + LEASE, at(1))
    assert claimed == await store.get_run(run.id)
    [attempt] = await store.list_attempts(run.id)
    assert (attempt.number, attempt.worker, attempt.started_at, attempt.outcome) == (1, "w1", at(1), None)
    assert await store.claim_run(run.id, "w2", at(1), at(1) + LEASE) is None
    assert await store.claim_run(new_id(), "w2", at(1), at(1) + LEASE) is None


async def test_concurrent_claims_have_one_winner(store: SqlStore) -> None:
    run = await fire_one(store, await new_job(store))
    claims = await asyncio.gather(*(store.claim_run(run.id, f"w{n}", START, START + LEASE) for n in range(8)))
    winners = [claim for claim in claims if claim is not None]
    assert len(winners) == 1
    assert len(await store.list_attempts(run.id)) == 1
    assert (await store.get_run(run.id)).lease_owner == winners[0].lease_owner


async def test_claim_runs_claims_what_is_claimable_in_one_call(store: SqlStore) -> None:
    """A batch mixing a PENDING run, a due retry, a retry not due yet, a running run, a finished
    run and an unknown id claims exactly the first two, each with its attempt and RUNNING event."""
    pending, due, early, running, finished = [await fire_one(store, await new_job(store, name=f"j{n}"))
                                              for n in range(5)]  # fmt: skip
    for run in (due, early, running, finished):
        await store.claim_run(run.id, "w0", at(0), at(0) + LEASE)
    await store.finish_attempt(due.id, 1, "w0", FAILURE, at(1), at(2))
    await store.finish_attempt(early.id, 1, "w0", FAILURE, at(1), at(9))
    await store.finish_attempt(finished.id, 1, "w0", SUCCESS, at(1), None)
    ids = [pending.id, due.id, early.id, running.id, finished.id, new_id(), pending.id]
    claimed = await store.claim_runs(ids, "w1", at(3), at(3) + LEASE)
    assert set(claimed) == {pending.id, due.id}
    assert (claimed[pending.id].attempts, claimed[due.id].attempts) == (1, 2)
    for run in claimed.values():
        assert run == await store.get_run(run.id)
        assert (run.state, run.lease_owner, run.lease_expires_at) == (RunState.RUNNING, "w1", at(3) + LEASE)
        assert (await store.list_attempts(run.id))[-1].worker == "w1"
        [*_, event] = await store.list_events(run.id)
        assert (event.state, event.attempt, event.node) == (RunState.RUNNING, run.attempts, "w1")
    assert [e.previous for e in await store.list_events(due.id)][-1] is RunState.RETRYING
    assert (await store.get_run(early.id)).state is RunState.RETRYING
    assert (await store.get_run(running.id)).lease_owner == "w0"
    assert await store.claim_runs([pending.id, due.id], "w2", at(4), at(4) + LEASE) == {}
    assert await store.claim_runs([], "w2", at(4), at(4) + LEASE) == {}


async def test_claim_runs_with_jobs_returns_each_claimed_run_with_its_live_job(store: SqlStore) -> None:
    """What a worker starts attempts from: the claim as claim_runs makes it, each run with its
    job as get_jobs reads it, and None for a run whose job was deleted meanwhile."""
    kept, gone = [await new_job(store, name=f"j{n}") for n in range(2)]
    kept_run, gone_run, taken = [await fire_one(store, job) for job in (kept, gone, await new_job(store))]
    await store.claim_run(taken.id, "w0", at(0), at(0) + LEASE)
    async with store.engine.begin() as connection:  # deleted after its run was queued
        await connection.execute(jobs.update().where(jobs.c.id == gone.id).values(deleted_at=at(0)))
    ids = [kept_run.id, gone_run.id, taken.id, new_id()]
    claimed = await store.claim_runs_with_jobs(ids, "w1", at(1), at(1) + LEASE)
    assert set(claimed) == {kept_run.id, gone_run.id}
    run, job = claimed[kept_run.id]
    assert run == await store.get_run(kept_run.id)
    assert (run.state, run.lease_owner, run.attempts) == (RunState.RUNNING, "w1", 1)
    assert job == (await store.get_jobs([kept.id]))[kept.id]
    assert claimed[gone_run.id][1] is None
    assert [e.state for e in await store.list_events(gone_run.id)][-1] is RunState.RUNNING
    assert await store.claim_runs_with_jobs([kept_run.id], "w2", at(2), at(2) + LEASE) == {}


async def test_concurrent_batch_claims_give_each_run_to_one_worker(store: SqlStore) -> None:
    fired = [await fire_one(store, await new_job(store, name=f"j{n}")) for n in range(6)]
    ids = [run.id for run in fired]
    claims = await asyncio.gather(
        *(store.claim_runs(ids[n % 3 :] + ids[: n % 3], f"w{n}", START, START + LEASE) for n in range(6))
    )
    owners = [run_id for claim in claims for run_id in claim]
    assert sorted(owners) == sorted(ids)  # every run claimed, none twice
    for run_id in ids:
        assert len(await store.list_attempts(run_id)) == 1


async def test_finish_attempts_records_many_outcomes_in_one_call(store: SqlStore) -> None:
    """Success, retry and failure in one batch, each with its attempt row and event; a run whose
    lease the worker lost and a run named twice are left alone."""
    fired = [await fire_one(store, await new_job(store, name=f"j{n}")) for n in range(5)]
    ok, retry, failed, lost, twice = fired
    await store.claim_runs([run.id for run in fired], "w1", at(0), at(0) + LEASE)
    finishes = [
        Finish(ok.id, 1, SUCCESS),
        Finish(retry.id, 1, FAILURE, at(7)),
        Finish(failed.id, 1, AttemptResult(Outcome.FAILURE, status_code=500, error="boom", output="x")),
        Finish(lost.id, 2, SUCCESS),  # not its attempt: as with a lost lease
        Finish(twice.id, 1, SUCCESS),
        Finish(twice.id, 1, FAILURE),
    ]
    recorded = await store.finish_attempts(finishes, "w1", at(2))
    assert {run_id: run.state for run_id, run in recorded.items()} == {
        ok.id: RunState.SUCCESS,
        retry.id: RunState.RETRYING,
        failed.id: RunState.FAILED,
    }
    assert (recorded[retry.id].next_attempt_at, recorded[retry.id].finished_at) == (at(7), None)
    assert (recorded[ok.id].finished_at, recorded[ok.id].lease_owner) == (at(2), None)
    for run in recorded.values():
        assert run == await store.get_run(run.id)
    [attempt] = await store.list_attempts(failed.id)
    assert (attempt.outcome, attempt.status_code, attempt.error, attempt.finished_at) == (
        Outcome.FAILURE,
        500,
        "boom",
        at(2),
    )
    [*_, event] = await store.list_events(failed.id)
    assert (event.state, event.previous, event.node, event.detail) == (
        RunState.FAILED,
        RunState.RUNNING,
        "w1",
        "failure: boom",
    )
    for run in (lost, twice):
        assert (await store.get_run(run.id)).state is RunState.RUNNING
    assert await store.finish_attempts([Finish(ok.id, 1, SUCCESS)], "w1", at(3)) == {}
    assert await store.finish_attempts([], "w1", at(3)) == {}


async def test_an_attempt_keeps_the_headers_it_sent_in_their_order(store: SqlStore) -> None:
    """``AttemptResult.request_headers`` go through ``finish_attempts`` as given (the worker has
    redacted them); an attempt that sent no request keeps None."""
    sent = (("Host", "h:1"), ("Authorization", "[redacted]"), ("X-Zeta", "z"), ("X-Alpha", "ä, b"))
    http, other = [await fire_one(store, await new_job(store, name=name)) for name in ("http", "other")]
    await store.claim_runs([http.id, other.id], "w1", at(0), at(0) + LEASE)
    finishes = [
        Finish(http.id, 1, AttemptResult(Outcome.SUCCESS, status_code=200, request_headers=sent)),
        Finish(other.id, 1, SUCCESS),
    ]
    assert set(await store.finish_attempts(finishes, "w1", at(1))) == {http.id, other.id}
    [attempt] = await store.list_attempts(http.id)
    assert attempt.request_headers == sent
    [plain] = await store.list_attempts(other.id)
    assert plain.request_headers is None


async def test_get_jobs_reads_the_live_jobs_of_many_ids(store: SqlStore) -> None:
    kept, gone = await new_job(store, name="kept"), await new_job(store, name="gone")
    await store.delete_job(gone.id, START)
    found = await store.get_jobs([kept.id, gone.id, new_id(), kept.id])
    assert found == {kept.id: await store.get_job(kept.id)}
    assert await store.get_jobs([]) == {}


async def test_get_runs_reads_many_runs_in_one_call(store: SqlStore) -> None:
    job = await new_job(store)
    first = await fire_one(store, job)
    second = await fire_one(store, await store.get_job(job.id))
    await store.delete_job(job.id, at(3))  # a deleted job's runs (their slots past) stay readable
    found = await store.get_runs([second.id, new_id(), first.id, second.id])
    assert found == {first.id: first, second.id: second}
    assert await store.get_runs([]) == {}


async def test_only_the_lease_holder_heartbeats_and_finishes(store: SqlStore) -> None:
    run = await fire_one(store, await new_job(store))
    await store.claim_run(run.id, "w1", START, START + LEASE)
    assert await store.heartbeat(run.id, 1, "w2", at(5)) is None
    assert await store.heartbeat(run.id, 2, "w1", at(5)) is None
    assert await store.finish_attempt(run.id, 1, "w2", SUCCESS, at(1), None) is None
    assert await store.finish_attempt(run.id, 2, "w1", SUCCESS, at(1), None) is None
    assert (await store.get_run(run.id)).lease_expires_at == START + LEASE
    beat = await store.heartbeat(run.id, 1, "w1", at(5))
    assert beat is not None
    assert beat.lease_expires_at == at(5)
    assert not beat.cancel_requested
    done = await store.finish_attempt(run.id, 1, "w1", SUCCESS, at(1), None)
    assert done is not None
    assert done.state is RunState.SUCCESS
    assert await store.heartbeat(run.id, 1, "w1", at(6)) is None
    assert await store.finish_attempt(run.id, 1, "w1", SUCCESS, at(1), None) is None


@pytest.mark.parametrize(
    ("result", "retry_at", "state"),
    [
        (SUCCESS, None, RunState.SUCCESS),
        (SUCCESS, at(9), RunState.SUCCESS),
        (FAILURE, None, RunState.FAILED),
        (FAILURE, at(9), RunState.RETRYING),
        (AttemptResult(Outcome.TIMEOUT), at(9), RunState.RETRYING),
    ],
)
async def test_finish_attempt(
    store: SqlStore, result: AttemptResult, retry_at: datetime | None, state: RunState
) -> None:
    run = await fire_one(store, await new_job(store))
    await store.claim_run(run.id, "w1", START, START + LEASE)
    finished = await store.finish_attempt(run.id, 1, "w1", result, at(1), retry_at)
    assert finished is not None
    assert finished.state is state
    assert (finished.lease_owner, finished.lease_expires_at) == (None, None)
    assert finished.finished_at == (at(1) if state.terminal else None)
    assert finished.next_attempt_at == (retry_at if state is RunState.RETRYING else None)
    [attempt] = await store.list_attempts(run.id)
    assert (attempt.outcome, attempt.finished_at, attempt.status_code) == (
        result.outcome,
        at(1),
        result.status_code,
    )
    assert (attempt.error, attempt.output, attempt.retry_after_s) == (
        result.error,
        result.output,
        result.retry_after_s,
    )
    assert (await store.list_events(run.id))[-1].state is state


async def test_a_retry_is_claimable_when_due_and_keeps_the_first_start(store: SqlStore) -> None:
    run = await fire_one(store, await new_job(store))
    await store.claim_run(run.id, "w1", at(0), at(0) + LEASE)
    await store.finish_attempt(run.id, 1, "w1", FAILURE, at(1), at(3))
    assert await store.claim_run(run.id, "w2", at(2), at(2) + LEASE) is None
    second = await store.claim_run(run.id, "w2", at(3), at(3) + LEASE)
    assert second is not None
    assert (second.attempts, second.started_at, second.next_attempt_at) == (2, at(0), None)
    assert [(a.number, a.worker) for a in await store.list_attempts(run.id)] == [(1, "w1"), (2, "w2")]


async def test_expired_lease_is_lost_then_retried_by_another_worker(store: SqlStore) -> None:
    run = await fire_one(store, await new_job(store))
    await store.claim_run(run.id, "w1", START, START + LEASE)
    assert await store.expire_leases(START + LEASE) == []  # expires strictly after
    [expired] = await store.expire_leases(START + LEASE + timedelta(microseconds=1))
    now = START + LEASE + timedelta(microseconds=1)
    assert (expired.id, expired.state, expired.next_attempt_at) == (run.id, RunState.RETRYING, now)
    assert (expired.lease_owner, expired.attempts) == (None, 1)
    assert expired == await store.get_run(run.id)
    [lost] = await store.list_attempts(run.id)
    assert (lost.outcome, lost.finished_at) == (Outcome.LOST, now)
    assert await store.expire_leases(at(5)) == []
    second = await store.claim_run(run.id, "w2", now, now + LEASE)
    assert second is not None
    assert second.attempts == 2
    assert await store.finish_attempt(run.id, 1, "w1", SUCCESS, now, None) is None  # the lost worker
    assert await store.heartbeat(run.id, 1, "w1", at(9)) is None
    assert await store.finish_attempt(run.id, 2, "w2", SUCCESS, now, None) is not None


async def test_a_run_that_keeps_losing_its_worker_fails(store: SqlStore) -> None:
    run = await fire_one(store, await new_job(store))
    now = START
    states = []
    for n in range(1, MAX_LOST_ATTEMPTS + 1):
        claimed = await store.claim_run(run.id, f"w{n}", now, now + LEASE)
        assert claimed is not None
        assert claimed.attempts == n
        now += 2 * LEASE
        [changed] = await store.expire_leases(now)
        states.append(changed.state)
    assert states == [RunState.RETRYING] * (MAX_LOST_ATTEMPTS - 1) + [RunState.FAILED]
    final = await store.get_run(run.id)
    assert (final.state, final.finished_at, final.next_attempt_at) == (RunState.FAILED, now, None)
    assert final.reason is not None
    assert all(a.outcome is Outcome.LOST for a in await store.list_attempts(run.id))
    assert await store.claim_run(run.id, "late", now, now + LEASE) is None


async def test_expire_leases_respects_its_limit(store: SqlStore) -> None:
    job = await new_job(store)
    for _ in range(3):
        run = await fire_one(store, job)
        await store.claim_run(run.id, "w", run.slot, run.slot + LEASE)
        job = await store.get_job(job.id)
    assert len(await store.expire_leases(at(5), limit=2)) == 2
    assert len(await store.expire_leases(at(5), limit=2)) == 1


async def test_count_runs_by_state(store: SqlStore) -> None:
    job = await new_job(store)
    first = await fire_one(store, job)
    await fire_one(store, await store.get_job(job.id))
    await fire_one(store, await store.get_job(job.id), RunState.SKIPPED, reason="misfire")
    assert await store.claim_run(first.id, "w", START, START + LEASE) is not None
    wanted = (RunState.PENDING, RunState.RUNNING, RunState.RETRYING, RunState.SKIPPED)
    assert await store.count_runs(wanted) == {
        RunState.PENDING: 1,
        RunState.RUNNING: 1,
        RunState.SKIPPED: 1,
    }
    assert await store.count_runs(()) == {}


async def test_fail_run(store: SqlStore) -> None:
    job = await new_job(store)
    pending = await fire_one(store, job)
    failed = await store.fail_run(pending.id, "job deleted", at(1))
    assert failed is not None
    assert (failed.state, failed.reason, failed.finished_at) == (RunState.FAILED, "job deleted", at(1))
    job = await store.get_job(job.id)
    retrying = await fire_one(store, job)
    await store.claim_run(retrying.id, "w", START, START + LEASE)
    await store.finish_attempt(retrying.id, 1, "w", FAILURE, START, at(5))
    failed = await store.fail_run(retrying.id, "cancelled", at(2))
    assert failed is not None
    assert (failed.state, failed.next_attempt_at) == (RunState.FAILED, None)
    assert await store.fail_run(new_id(), "gone", at(2)) is None


async def test_illegal_transitions_are_refused(store: SqlStore) -> None:
    job = await new_job(store)
    done = await fire_one(store, job)
    await store.claim_run(done.id, "w", done.slot, done.slot + LEASE)
    await store.finish_attempt(done.id, 1, "w", SUCCESS, START, None)
    job = await store.get_job(job.id)
    skipped = await fire_one(store, job, RunState.SKIPPED, reason="paused")
    job = await store.get_job(job.id)
    running = await fire_one(store, job)
    await store.claim_run(running.id, "w", running.slot, running.slot + LEASE)
    job = await store.get_job(job.id)
    pending = await fire_one(store, job)
    before = {
        run_id: await store.list_events(run_id) for run_id in (done.id, skipped.id, running.id, pending.id)
    }

    for terminal in (done, skipped):
        assert await store.claim_run(terminal.id, "w2", at(9), at(9) + LEASE) is None
        assert await store.fail_run(terminal.id, "nope", at(9)) is None
        assert await store.finish_attempt(terminal.id, 1, "w", FAILURE, at(9), at(10)) is None
    assert await store.fail_run(running.id, "not without its worker", at(9)) is None  # PENDING/RETRYING only
    assert await store.finish_attempt(pending.id, 0, "w", SUCCESS, at(9), None) is None
    assert await store.heartbeat(pending.id, 0, "w", at(9)) is None
    assert await store.expire_leases(START) == []
    with pytest.raises(InvalidInputError):
        await store.create_manual_run(make_run(job, at(9), RunState.SUCCESS, kind=RunKind.MANUAL))
    for run_id, events in before.items():
        assert await store.list_events(run_id) == events
    assert (await store.get_run(done.id)).state is RunState.SUCCESS


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


async def test_runs_to_dispatch_and_mark_queued(store: SqlStore) -> None:
    job = await new_job(store)
    fresh = await fire_one(store, job)
    job = await store.get_job(job.id)
    queued = await fire_one(store, job)
    await store.mark_queued([queued.id], at(10))
    job = await store.get_job(job.id)
    running = await fire_one(store, job)
    await store.claim_run(running.id, "w", at(10), at(10) + LEASE)
    await store.mark_queued([running.id], at(10))  # claimed before its stamp: stamped once
    await store.mark_queued([running.id], at(11))  # stamped and not claimable: kept
    assert (await store.get_run(running.id)).queued_at == at(10)
    job = await store.get_job(job.id)
    retry_due = await fire_one(store, job)
    await store.claim_run(retry_due.id, "w", at(10), at(10) + LEASE)
    await store.finish_attempt(retry_due.id, 1, "w", FAILURE, at(10), at(11))
    job = await store.get_job(job.id)
    retry_later = await fire_one(store, job)
    await store.claim_run(retry_later.id, "w", at(10), at(10) + LEASE)
    await store.finish_attempt(retry_later.id, 1, "w", FAILURE, at(10), at(20))
    job = await store.get_job(job.id)
    skipped = await fire_one(store, job, RunState.SKIPPED)

    async def dispatch(now: datetime, queued_before: datetime, limit: int = 1000) -> set[str]:
        return {run.id for run in await store.runs_to_dispatch(now, queued_before, limit)}

    assert await dispatch(at(12), queued_before=at(10)) == {fresh.id, retry_due.id}
    assert await dispatch(at(12), queued_before=at(10.5)) == {fresh.id, queued.id, retry_due.id}
    assert await dispatch(at(20), queued_before=at(10)) == {fresh.id, retry_due.id, retry_later.id}
    assert len(await dispatch(at(20), queued_before=at(10), limit=2)) == 2
    created = fresh.created_at
    assert created is not None
    young = await store.runs_to_dispatch(at(12), at(10), unqueued_before=created)
    assert {run.id for run in young} == {retry_due.id}  # never queued, but not created before
    after = created + timedelta(microseconds=1)
    older = await store.runs_to_dispatch(at(12), at(10), unqueued_before=after)
    assert {run.id for run in older} == {fresh.id, retry_due.id}
    assert (await store.get_run(queued.id)).queued_at == at(10)
    assert skipped.id not in await dispatch(at(99), at(99))


async def test_active_runs(store: SqlStore) -> None:
    job = await new_job(store)
    idle = await new_job(store, "idle")
    pending = await fire_one(store, job)
    job = await store.get_job(job.id)
    done = await fire_one(store, job)
    await store.claim_run(done.id, "w", done.slot, done.slot + LEASE)
    await store.finish_attempt(done.id, 1, "w", SUCCESS, START, None)
    job = await store.get_job(job.id)
    running = await fire_one(store, job)
    await store.claim_run(running.id, "w", running.slot, running.slot + LEASE)
    job = await store.get_job(job.id)
    await fire_one(store, job, RunState.SKIPPED)
    active = await store.active_runs([job.id, idle.id])
    assert [run.id for run in active[job.id]] == [pending.id, running.id]
    assert active[idle.id] == []


async def test_list_runs_newest_first_with_stable_pages(store: SqlStore) -> None:
    job = await new_job(store)
    other = await new_job(store, "other")
    runs = []
    for _ in range(5):
        runs.append(await fire_one(store, job))
        job = await store.get_job(job.id)
    same_slot = [  # manual runs share a slot: the id breaks the tie
        (await store.create_manual_run(make_run(job, at(2), kind=RunKind.MANUAL)))[0] for _ in range(2)
    ]
    other_run = await fire_one(store, other)
    newest_first = sorted([*runs, *same_slot], key=lambda run: (run.slot, run.id), reverse=True)

    first = await store.list_runs(RunQuery(job_id=job.id, limit=3))
    assert first.items == newest_first[:3]
    await store.create_manual_run(make_run(job, at(60), kind=RunKind.MANUAL))  # newer: not in later pages
    await store.create_manual_run(make_run(job, at(-60), kind=RunKind.MANUAL))  # older: at the end
    seen = list(first.items)
    cursor = first.next_cursor
    while cursor is not None:
        page = await store.list_runs(RunQuery(job_id=job.id, limit=3, cursor=cursor))
        seen.extend(page.items)
        cursor = page.next_cursor
    assert [run.id for run in seen[: len(newest_first)]] == [run.id for run in newest_first]
    assert len(seen) == len(newest_first) + 1
    assert seen[-1].slot == at(-60)

    everything = await store.list_runs(RunQuery(limit=100))
    assert other_run.id in {run.id for run in everything.items}
    assert everything.next_cursor is None
    only_pending = await store.list_runs(RunQuery(job_id=job.id, states=(RunState.PENDING,)))
    assert len(only_pending.items) == len(newest_first) + 2
    assert (await store.list_runs(RunQuery(states=(RunState.RUNNING, RunState.SUCCESS)))).items == []


async def test_every_state_change_is_recorded_in_order(store: SqlStore) -> None:
    run = await fire_one(store, await new_job(store))
    await store.claim_run(run.id, "w1", at(1), at(1) + LEASE)
    await store.finish_attempt(run.id, 1, "w1", FAILURE, at(2), at(3))
    await store.claim_run(run.id, "w2", at(3), at(3) + LEASE)
    await store.expire_leases(at(10))
    await store.claim_run(run.id, "w3", at(11), at(11) + LEASE)
    await store.heartbeat(run.id, 3, "w3", at(12) + LEASE)  # not a state change
    await store.finish_attempt(run.id, 3, "w3", SUCCESS, at(12), None)

    events = await store.list_events(run.id)
    assert [(e.previous, e.state, e.attempt, e.at) for e in events] == [
        (None, RunState.PENDING, 0, START),
        (RunState.PENDING, RunState.RUNNING, 1, at(1)),
        (RunState.RUNNING, RunState.RETRYING, 1, at(2)),
        (RunState.RETRYING, RunState.RUNNING, 2, at(3)),
        (RunState.RUNNING, RunState.RETRYING, 2, at(10)),
        (RunState.RETRYING, RunState.RUNNING, 3, at(11)),
        (RunState.RUNNING, RunState.SUCCESS, 3, at(12)),
    ]
    for before, after in zip([None, *events], events, strict=False):
        assert after.state in LEGAL_TRANSITIONS[after.previous]
        assert after.previous == (None if before is None else before.state)
    assert events[-1].state is (await store.get_run(run.id)).state
    assert [a.outcome for a in await store.list_attempts(run.id)] == [
        Outcome.FAILURE,
        Outcome.LOST,
        Outcome.SUCCESS,
    ]


async def test_history_of_a_missing_run_is_not_found(store: SqlStore) -> None:
    with pytest.raises(NotFoundError):
        await store.list_events(new_id())
    with pytest.raises(NotFoundError):
        await store.list_attempts(new_id())
    with pytest.raises(NotFoundError):
        await store.get_run(new_id())


# -- concurrency and availability ----------------------------------------------------------------


async def _lifecycle(store: SqlStore, job: Job, cycles: int, worker: str) -> list[Run]:
    done = []
    for _ in range(cycles):
        job = await store.get_job(job.id)
        assert job.next_run_at is not None
        run = make_run(job, job.next_run_at)
        result = await store.fire([firing_of(job, run)], START)
        assert result.accepted
        await store.mark_queued([run.id], START)
        claimed = await store.claim_run(run.id, worker, run.slot, run.slot + LEASE)
        assert claimed is not None
        assert await store.heartbeat(run.id, 1, worker, run.slot + 2 * LEASE) is not None
        await store.list_runs(RunQuery(job_id=job.id, limit=2))
        finished = await store.finish_attempt(run.id, 1, worker, SUCCESS, START, None)
        assert finished is not None
        done.append(finished)
    return done


async def test_concurrent_writers_never_fail(store: SqlStore, store_url: str) -> None:
    """Many tasks on two stores (two processes' worth of engines) over one database: writes
    wait for each other, none fails with "database is locked"."""
    other = await open_store(store_url)
    try:
        jobs = [await new_job(store, f"job-{n}") for n in range(12)]
        results = await asyncio.gather(
            *(_lifecycle(store if n % 2 else other, job, 4, f"w{n}") for n, job in enumerate(jobs)),
            *(store.expire_leases(START) for _ in range(4)),
            *(other.runs_to_dispatch(START, START) for _ in range(4)),
        )
        finished = [run for result in results[: len(jobs)] for run in result]
        assert len(finished) == 4 * len(jobs)
        assert all(run.state is RunState.SUCCESS for run in finished)
    finally:
        await other.close()


async def test_an_unreachable_backend_is_unavailable(unreachable_url: str) -> None:
    threads = set(threading.enumerate())
    with pytest.raises(BackendUnavailableError) as raised:
        await open_store(unreachable_url)
    assert raised.value.retryable
    # aiosqlite stops the worker thread of a failed connection without waiting for it; let it
    # finish while this test's event loop still runs (it reports back to the loop).
    for thread in set(threading.enumerate()) - threads:
        await asyncio.to_thread(thread.join, 5)


# Only PostgreSQL runs write transactions side by side; SQLite's are one at a time, and its claim
# is one function on the driver's thread (tests/store/test_lite.py).
@pytest.mark.parametrize("backend", [b for b in BACKENDS if b != "sqlite"])
async def test_batch_writes_of_runs_run_again_when_they_lose_a_race(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A claim that PostgreSQL aborted for a concurrent one (a deadlock) wrote nothing and is run
    again at once, instead of failing the worker's whole receive."""
    run = await fire_one(store, await new_job(store))
    real_claim = sql._claim
    calls = 0

    async def losing_once(*args: Any, **options: Any) -> dict[str, tuple[Run, Job | None]]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RaceLostError("deadlock detected")
        return await real_claim(*args, **options)

    monkeypatch.setattr(sql, "_claim", losing_once)
    claimed = await store.claim_runs([run.id], "w1", START, START + LEASE)
    assert list(claimed) == [run.id]
    assert calls == 2
    assert len(await store.list_attempts(run.id)) == 1

    async def always_losing(*args: Any, **options: Any) -> dict[str, tuple[Run, Job | None]]:
        raise RaceLostError("deadlock detected")

    monkeypatch.setattr(sql, "_claim", always_losing)
    with pytest.raises(RaceLostError):
        await store.claim_runs([run.id], "w2", START, START + LEASE)

"""Overlap policies with an earlier run still active, and deleting a job, over the real store."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from cronwheel.errors import NotFoundError
from cronwheel.model import AttemptResult, Finish, Outcome, Overlap, RetryPolicy, Run, RunState, SkipReason
from cronwheel.store.port import RunQuery

from . import targets
from .harness import Roles, at, wait_until

PENDING, SKIPPED = RunState.PENDING, RunState.SKIPPED
OVERLAP = SkipReason.OVERLAP.value
LEASE = timedelta(minutes=10)


async def leave_running(roles: Roles, run_id: str, worker: str = "ghost") -> None:
    """A worker claims the run and is still busy with it (no heartbeat needed: long lease)."""
    claimed = await roles.store.claim_run(run_id, worker, roles.now, roles.now + LEASE)
    assert claimed is not None
    assert claimed.state is RunState.RUNNING


async def test_forbid_skips_slots_while_a_run_is_running(roles: Roles) -> None:
    job = await roles.create(overlap=Overlap.FORBID)
    await roles.tick(at(1))
    [first] = await roles.runs(job.id)
    await leave_running(roles, first.id)

    await roles.tick(at(2))
    await roles.tick(at(3))
    finished = await roles.store.finish_attempt(
        first.id, 1, "ghost", AttemptResult(Outcome.SUCCESS), at(3, 10), None
    )
    assert finished is not None
    assert finished.state is RunState.SUCCESS
    await roles.tick(at(4))

    assert await roles.table(job.id) == [
        (at(1), RunState.SUCCESS, None),
        (at(2), SKIPPED, OVERLAP),
        (at(3), SKIPPED, OVERLAP),
        (at(4), PENDING, None),
    ]
    assert (await roles.store.get_run(first.id)).cancel_requested is False
    assert roles.scheduler.stats.skipped == 2


async def test_forbid_counts_a_queued_run_as_active(roles: Roles) -> None:
    job = await roles.create(overlap=Overlap.FORBID)
    await roles.tick(at(1))
    await roles.tick(at(2))  # the 12:01 run is still PENDING: not started is not finished
    assert await roles.table(job.id) == [(at(1), PENDING, None), (at(2), SKIPPED, OVERLAP)]
    await roles.work()
    await roles.tick(at(3))
    assert [r.state for r in await roles.runs(job.id)] == [RunState.SUCCESS, SKIPPED, PENDING]


async def test_allow_starts_a_new_run_beside_a_running_one(roles: Roles) -> None:
    job = await roles.create(overlap=Overlap.ALLOW)
    await roles.tick(at(1))
    [first] = await roles.runs(job.id)
    await leave_running(roles, first.id)
    await roles.tick(at(2))
    await roles.tick(at(3))
    assert await roles.table(job.id) == [
        (at(1), RunState.RUNNING, None),
        (at(2), PENDING, None),
        (at(3), PENDING, None),
    ]
    assert (await roles.store.get_run(first.id)).cancel_requested is False


@pytest.mark.parametrize("noticed_by", ["heartbeat", "cancellation-watch"])
async def test_replace_cancels_the_running_attempt_and_starts_the_new_slot(
    roles: Roles, noticed_by: str
) -> None:
    job = await roles.create(overlap=Overlap.REPLACE)
    # heartbeat: a short lease, beating every 0.1 s of the worker's clock; watch: its shared poll
    worker = roles.new_worker("worker-r", lease_s=0.3 if noticed_by == "heartbeat" else 600)
    await roles.tick(at(1))
    [delivery] = await roles.receive()
    targets.hangs.append(5.0)
    attempt = asyncio.create_task(worker.handle(delivery))
    await wait_until(lambda: len(targets.calls) == 1)
    first = delivery.trigger.run_id

    await roles.tick(at(2))
    assert (await roles.store.get_run(first)).cancel_requested is True
    if noticed_by == "heartbeat":
        roles.clock.advance(0.2)  # the attempt's next heartbeat comes due, and learns of the cancel
    else:
        await worker.check_cancellations()
    replaced = await asyncio.wait_for(attempt, 3.0)
    await roles.queue.ack("default", [delivery])

    assert replaced is not None
    assert replaced.state is RunState.FAILED
    assert targets.cancelled == [first]
    [record] = await roles.attempts(first)
    assert (record.outcome, record.worker) == (Outcome.CANCELLED, "worker-r")
    assert record.error is not None
    assert record.error.startswith("cancelled")

    done = await roles.work()
    assert [r.state if r else None for r in done] == [RunState.SUCCESS]
    assert [(slot, state) for slot, state, _ in await roles.table(job.id)] == [
        (at(1), RunState.FAILED),
        (at(2), RunState.SUCCESS),
    ]
    assert await roles.history(first) == [PENDING, RunState.RUNNING, RunState.FAILED]
    await roles.audit()


async def test_the_cancellation_watch_asks_only_about_attempts_that_ran_a_pass(roles: Roles) -> None:
    """The watch's pass leaves out an attempt younger than the pass (the next pass asks), so a
    worker of short attempts does not read the store at every pass; asked, it stops."""
    job = await roles.create(overlap=Overlap.REPLACE)
    worker = roles.new_worker("worker-w", lease_s=600)
    await roles.tick(at(1))
    [delivery] = await roles.receive()
    targets.hangs.append(5.0)
    attempt = asyncio.create_task(worker.handle(delivery))
    await wait_until(lambda: len(targets.calls) == 1)
    await roles.tick(at(2))  # replace: the running run is asked to stop

    await worker.check_cancellations(running_for_s=60.0)  # younger than that: not asked yet
    await asyncio.sleep(0.05)
    assert not attempt.done()
    await worker.check_cancellations(running_for_s=0.0)
    replaced = await asyncio.wait_for(attempt, 3.0)
    await roles.queue.ack("default", [delivery])
    assert replaced is not None
    assert replaced.state is RunState.FAILED
    assert targets.cancelled == [delivery.trigger.run_id]
    await roles.work()
    assert [state for _, state, _ in await roles.table(job.id)] == [RunState.FAILED, RunState.SUCCESS]


async def test_replace_does_not_execute_a_replaced_run_that_had_not_started(roles: Roles) -> None:
    job = await roles.create(overlap=Overlap.REPLACE)
    await roles.tick(at(1))
    await roles.tick(at(2))
    first, second = await roles.runs(job.id)
    assert (await roles.store.get_run(first.id)).cancel_requested is True
    await roles.work()
    assert [call.execution_id for call in targets.calls] == [second.id]
    assert (await roles.store.get_run(first.id)).state is RunState.FAILED


async def test_delete_stops_firing_keeps_history_and_fails_pending_runs(roles: Roles) -> None:
    job = await roles.create()
    stale_view = roles.new_scheduler("scheduler-2", reload_every_s=3600)
    await stale_view.load(at(1, 30))
    await roles.tick(at(1))
    [pending] = await roles.runs(job.id)

    roles.clock.set(at(1, 30))
    deleted = await roles.service.delete(job.id)
    await roles.notify()
    assert deleted.deleted_at == at(1, 30)
    assert job.id not in roles.scheduler.wheel
    with pytest.raises(NotFoundError):
        await roles.store.get_job(job.id)

    for minute in range(2, 6):
        await roles.tick(at(minute))
        await roles.tick(at(minute), stale_view)
    assert stale_view.stats.fired == 0
    assert stale_view.stats.stale == 1
    assert [r.id for r in await roles.runs(job.id)] == [pending.id]  # history stays readable

    done = await roles.work()
    assert [r.state if r else None for r in done] == [RunState.FAILED]
    assert targets.calls == []  # never executed
    run = await roles.store.get_run(pending.id)
    assert run.state is RunState.FAILED
    assert run.finished_at == at(5)
    assert [(a.outcome, a.error) for a in await roles.attempts(pending.id)] == [
        (Outcome.CANCELLED, "the job was deleted")
    ]
    page = await roles.store.list_runs(RunQuery(job_id=job.id, states=(RunState.FAILED,)))
    assert [r.id for r in page.items] == [pending.id]
    await roles.audit()


async def test_a_retrying_run_of_a_deleted_job_is_not_tried_again(roles: Roles) -> None:
    job = await roles.create(
        payload={"fail": 1}, retry=RetryPolicy(max_attempts=3, initial_delay_s=10, jitter=False)
    )
    await roles.tick(at(1))
    [retrying] = await roles.work()
    assert retrying is not None
    assert retrying.state is RunState.RETRYING
    await roles.service.delete(job.id)
    await roles.notify()
    roles.clock.set(at(1, 10))
    done = await roles.work()
    assert [r.state if r else None for r in done] == [RunState.FAILED]
    assert len(targets.calls) == 1
    assert await roles.history(retrying.id) == [
        PENDING,
        RunState.RUNNING,
        RunState.RETRYING,
        RunState.RUNNING,
        RunState.FAILED,
    ]
    await roles.audit()


async def test_delete_requests_cancellation_of_a_running_run(roles: Roles) -> None:
    job = await roles.create()
    await roles.tick(at(1))
    [run] = await roles.runs(job.id)
    await leave_running(roles, run.id)
    await roles.service.delete(job.id)
    beat = await roles.store.heartbeat(run.id, 1, "ghost", roles.now + LEASE)
    assert beat is not None
    assert beat.cancel_requested


async def test_a_stop_that_comes_after_the_attempt_returned_does_not_stop_its_recording(
    roles: Roles,
) -> None:
    """The attempt runs in the task that records its outcome: a stop (a lease found lost, a
    cancellation request) that arrives once the executor has returned leaves that task alone."""
    await roles.create()
    worker = roles.new_worker("worker-late", lease_s=600)
    await roles.tick(at(1))
    [delivery] = await roles.receive()
    targets.hangs.append(0.2)
    handled = asyncio.create_task(worker.handle(delivery))
    await wait_until(lambda: len(targets.calls) == 1)
    [held] = worker._attempts.values()
    recording = worker.finisher.record

    async def record_after_a_late_stop(finish: Finish) -> Run | None:
        held.stop(AttemptResult(Outcome.CANCELLED, error="lease lost"))  # as the keeper would
        await asyncio.sleep(0)
        return await recording(finish)

    worker.finisher.record = record_after_a_late_stop  # type: ignore[method-assign]
    done = await asyncio.wait_for(handled, 3.0)
    await roles.queue.ack("default", [delivery])

    assert done is not None
    assert done.state is RunState.SUCCESS
    [attempt] = await roles.attempts(done.id)
    assert (attempt.outcome, attempt.error) == (Outcome.SUCCESS, None)
    assert targets.cancelled == []

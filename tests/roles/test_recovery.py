"""At-least-once delivery when things die (guarantee 3, docs/guarantees.md): a worker dies mid-attempt, a
trigger is lost, the scheduler dies between the store write and the publish, the whole embedded
process restarts. The store is the record; the sweeper re-queues; the execution id is kept."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from datetime import datetime, timedelta

import pytest

from cronwheel.errors import BackendUnavailableError
from cronwheel.model import AttemptResult, Outcome, RetryPolicy, RunState
from cronwheel.queue import Delivery, Trigger
from cronwheel.queue.memory import MemoryQueue
from cronwheel.scheduler.loop import Scheduler
from cronwheel.store.port import MAX_LOST_ATTEMPTS

from . import targets
from .harness import Roles, at, build, wait_until

PENDING, RUNNING, RETRYING = RunState.PENDING, RunState.RUNNING, RunState.RETRYING
SUCCESS, FAILED = RunState.SUCCESS, RunState.FAILED


class PublishFails(MemoryQueue):
    """A queue that is down: the scheduler dies between its store transaction and the publish."""

    async def publish(self, triggers: Sequence[Trigger]) -> None:
        raise ConnectionError("queue is down")

    async def publish_at(self, trigger: Trigger, at: datetime) -> None:
        raise ConnectionError("queue is down")


async def crash_mid_attempt(roles: Roles, delivery: Delivery, node: str, lease_s: float) -> None:
    """A real worker starts the attempt, then its process dies (the task is cancelled before it
    can record anything): the run stays RUNNING under that worker's lease."""
    dying = roles.new_worker(node, lease_s=lease_s)
    targets.hangs.append(30.0)
    calls = len(targets.calls)
    task = asyncio.create_task(dying.handle(delivery))
    await wait_until(lambda: len(targets.calls) > calls)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def test_worker_dies_mid_attempt_sweep_retries_with_the_same_execution_id(roles: Roles) -> None:
    job = await roles.create(payload={"n": 7})
    await roles.tick(at(1))
    [delivery] = await roles.receive()
    run_id = delivery.trigger.run_id
    await crash_mid_attempt(roles, delivery, "worker-dead", lease_s=30)
    left = await roles.store.get_run(run_id)
    assert (left.state, left.lease_owner, left.lease_expires_at) == (RUNNING, "worker-dead", at(1, 30))

    roles.clock.set(at(1, 29))
    assert await roles.sweeper.sweep(roles.now) == 0  # the lease still holds
    assert (await roles.store.get_run(run_id)).state is RUNNING

    roles.clock.set(at(1, 31))
    assert await roles.sweeper.sweep(roles.now) == 1
    swept = await roles.store.get_run(run_id)
    assert (swept.state, swept.next_attempt_at, swept.lease_owner) == (RETRYING, at(1, 31), None)
    assert swept.queued_at == at(1, 31)

    rescuer = roles.new_worker("worker-2")
    [done] = await roles.work(rescuer)
    assert done is not None
    assert (done.id, done.state, done.attempts) == (run_id, SUCCESS, 2)
    assert [(c.execution_id, c.attempt, c.payload) for c in targets.calls] == [
        (run_id, 1, {"n": 7}),
        (run_id, 2, {"n": 7}),
    ]
    attempts = await roles.attempts(run_id)
    assert [(a.number, a.worker, a.outcome, a.error) for a in attempts] == [
        (1, "worker-dead", Outcome.LOST, "lease expired"),
        (2, "worker-2", Outcome.SUCCESS, None),
    ]
    events = await roles.store.list_events(run_id)
    assert [(e.state, e.attempt, e.node) for e in events] == [
        (PENDING, 0, None),
        (RUNNING, 1, "worker-dead"),
        (RETRYING, 1, None),
        (RUNNING, 2, "worker-2"),
        (SUCCESS, 2, "worker-2"),
    ]
    assert events[2].detail == "lease of worker-dead expired"

    # the dead worker's zombie cannot record anything any more
    zombie = await roles.store.finish_attempt(
        run_id, 1, "worker-dead", AttemptResult(Outcome.SUCCESS), roles.now, None
    )
    assert zombie is None
    assert await roles.store.heartbeat(run_id, 1, "worker-dead", roles.now + timedelta(seconds=30)) is None

    # the dead worker had acknowledged its trigger once it held the run: nothing comes back
    roles.clock.set(at(1) + timedelta(seconds=301))
    assert await roles.receive() == []
    assert len(targets.calls) == 2
    assert await roles.sweeper.sweep(roles.now) == 0
    assert (await roles.store.get_job(job.id)).next_run_at == at(2)
    await roles.audit()


async def test_a_run_whose_workers_keep_dying_ends_failed(roles: Roles) -> None:
    await roles.create()
    await roles.tick(at(1))
    [run] = await roles.runs()
    await roles.receive()  # the queued trigger goes to the first worker, which dies
    for lost in range(1, MAX_LOST_ATTEMPTS + 1):
        claimed = await roles.store.claim_run(
            run.id, f"w{lost}", roles.now, roles.now + timedelta(seconds=10)
        )
        assert claimed is not None
        assert claimed.attempts == lost
        roles.clock.advance(11)
        assert await roles.sweeper.sweep(roles.now) == (1 if lost < MAX_LOST_ATTEMPTS else 0)
        await roles.receive()  # handed to the next worker, which dies as well
    final = await roles.store.get_run(run.id)
    assert final.state is FAILED
    assert final.reason is not None
    assert "lost" in final.reason
    assert [a.outcome for a in await roles.attempts(run.id)] == [Outcome.LOST] * MAX_LOST_ATTEMPTS
    assert await roles.history(run.id) == [
        PENDING,
        *[RUNNING, RETRYING] * (MAX_LOST_ATTEMPTS - 1),
        RUNNING,
        FAILED,
    ]
    await roles.audit()


async def test_a_lost_attempt_does_not_use_the_retry_budget(roles: Roles) -> None:
    await roles.create(
        payload={"fail": 99}, retry=RetryPolicy(max_attempts=2, initial_delay_s=5, jitter=False)
    )
    await roles.tick(at(1))
    [delivery] = await roles.receive()
    await crash_mid_attempt(roles, delivery, "worker-dead", lease_s=30)
    roles.clock.set(at(1, 31))
    assert await roles.sweeper.sweep(roles.now) == 1
    [second] = await roles.work()  # the target's first real try fails: one of two is left
    assert second is not None
    assert second.attempts == 2
    assert second.state is RETRYING


async def test_a_lost_trigger_is_requeued_by_the_sweep(roles: Roles) -> None:
    await roles.create()
    await roles.tick(at(1))
    [run] = await roles.runs()
    await roles.queue.close()  # the trigger is gone (the queue lost it)
    roles.clock.set(at(1, 10))
    assert await roles.sweeper.sweep(roles.now) == 0  # queued 10 s ago: not overdue yet
    roles.clock.set(at(1, 31))
    assert await roles.sweeper.sweep(roles.now) == 1
    assert (await roles.store.get_run(run.id)).queued_at == at(1, 31)
    [done] = await roles.work()
    assert done is not None
    assert (done.id, done.state, done.attempts) == (run.id, SUCCESS, 1)
    await roles.audit()


async def test_scheduler_dies_between_store_and_queue_the_sweep_publishes(roles: Roles) -> None:
    job = await roles.create()
    broken = Scheduler(roles.store, PublishFails(roles.clock), roles.clock, "scheduler-broken")
    roles.clock.set(at(1))
    with pytest.raises(ConnectionError):
        await broken.tick(at(1))
    [run] = await roles.runs(job.id)
    assert (run.state, run.queued_at) == (PENDING, None)  # written, never queued
    assert (await roles.store.get_job(job.id)).next_run_at == at(2)

    roles.clock.set(at(1, 1))
    assert await roles.sweeper.sweep(roles.now) == 0  # its scheduler may be publishing it now
    assert (await roles.store.get_run(run.id)).queued_at is None
    roles.clock.set(at(1, 2.5))
    assert await roles.sweeper.sweep(roles.now) == 1  # never queued after the grace: no 30 s wait
    assert (await roles.store.get_run(run.id)).queued_at == at(1, 2.5)
    [done] = await roles.work()
    assert done is not None
    assert (done.id, done.state) == (run.id, SUCCESS)
    await roles.audit()


async def _restart_scenario(roles: Roles) -> tuple[str, str, str]:
    """Three jobs left in three states by a process that then died:
    a RUNNING attempt (lease still valid), a PENDING run never queued, a PENDING run queued."""
    running = await roles.create("running", "1 12 * * *", payload={"hang": 1, "hang_s": 30})
    queued = await roles.create("queued", "1 12 * * *")
    unqueued = await roles.create("unqueued", "2 12 * * *")
    await roles.scheduler.load(at(0))
    await roles.tick(at(1))
    deliveries = {d.trigger.job_id: d for d in await roles.receive()}
    await crash_mid_attempt(roles, deliveries[running.id], "worker-old", lease_s=600)
    # the unqueued job's slot is written by a scheduler whose publish failed
    roles.clock.set(at(2))
    broken = Scheduler(roles.store, PublishFails(roles.clock), roles.clock, "scheduler-old")
    with pytest.raises(ConnectionError):
        await broken.tick(at(2))
    by_job = {r.job_id: r for r in await roles.runs()}
    assert len(by_job) == 3
    assert by_job[unqueued.id].queued_at is None
    return by_job[running.id].id, by_job[unqueued.id].id, by_job[queued.id].id


async def test_recover_after_restart_requeues_and_expires_every_lease(roles: Roles) -> None:
    running_id, unqueued_id, queued_id = await _restart_scenario(roles)
    assert (await roles.store.get_run(running_id)).lease_expires_at == at(1, 600)

    roles.clock.set(at(2, 30))
    fresh = build(roles.clock, roles.store)  # the restarted process: empty queue, new roles
    try:
        requeued = await fresh.sweeper.recover_after_restart(roles.now)
        swept = await roles.store.get_run(running_id)
        assert swept.state is RETRYING
        assert swept.lease_owner is None
        [lost] = await roles.attempts(running_id)
        assert (lost.worker, lost.outcome) == ("worker-old", Outcome.LOST)
        queued_now = {d.trigger.run_id for d in await fresh.receive()}
        assert {running_id, unqueued_id, queued_id} <= queued_now
        assert requeued == len(queued_now)

        for run_id in (unqueued_id, queued_id):
            await fresh.queue.publish([Trigger(run_id, (await roles.store.get_run(run_id)).job_id)])
        outcomes = await fresh.work()
        assert [r.state if r else None for r in outcomes] == [SUCCESS, SUCCESS]
        assert (await roles.store.get_run(unqueued_id)).attempts == 1
        assert (await roles.store.get_run(queued_id)).attempts == 1
    finally:
        await fresh.executors.close()


async def test_a_run_that_was_running_at_the_restart_completes(roles: Roles) -> None:
    """Regression: recover_after_restart once called expire_leases(FAR_FUTURE), stamping the lost
    attempt and the run's next_attempt_at with year 9000, so the run was never claimable again."""
    running_id, _, _ = await _restart_scenario(roles)
    roles.clock.set(at(2, 30))
    fresh = build(roles.clock, roles.store)
    try:
        await fresh.sweeper.recover_after_restart(roles.now)
        swept = await roles.store.get_run(running_id)
        [lost] = await roles.attempts(running_id)
        assert lost.finished_at == at(2, 30)
        assert swept.next_attempt_at is not None
        assert swept.next_attempt_at <= at(2, 30)
        outcomes = await fresh.work()
        assert running_id in {r.id for r in outcomes if r is not None and r.state is SUCCESS}
        assert [(a.number, a.outcome) for a in await roles.attempts(running_id)] == [
            (1, Outcome.LOST),
            (2, Outcome.SUCCESS),
        ]
        assert [c.attempt for c in targets.calls_of(running_id)] == [1, 2]
        await fresh.audit()
    finally:
        await fresh.executors.close()


async def test_a_lost_retry_trigger_is_requeued_once_overdue(roles: Roles) -> None:
    await roles.create(payload={"fail": 1}, retry=RetryPolicy(max_attempts=2, initial_delay_s=10))
    await roles.tick(at(1))
    [retrying] = await roles.work()
    assert retrying is not None
    assert retrying.next_attempt_at is not None
    due = retrying.next_attempt_at
    await roles.queue.close()  # the delayed retry trigger is lost
    roles.clock.set(due + timedelta(seconds=29))
    assert await roles.sweeper.sweep(roles.now) == 0
    roles.clock.set(due + timedelta(seconds=31))
    assert await roles.sweeper.sweep(roles.now) == 1
    [done] = await roles.work()
    assert done is not None
    assert (done.id, done.state, done.attempts) == (retrying.id, SUCCESS, 2)
    await roles.audit()


class HangingStore:
    """Wraps the real store; ``due_jobs`` hangs, as over a link that silently drops packets."""

    def __init__(self, inner: object) -> None:
        self._inner = inner
        self.hang = asyncio.Event()
        self.hang.set()

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)

    async def due_jobs(self, *args: object, **kwargs: object) -> object:
        await self.hang.wait()
        return await self._inner.due_jobs(*args, **kwargs)  # type: ignore[attr-defined]


async def test_a_scheduler_whose_store_hangs_turns_unhealthy_and_recovers(roles: Roles) -> None:
    """The coordinator heartbeats only while ``healthy()``: a scheduler that cannot reach its
    store within ``stall_s`` lets its shards go to others (tests/coordinator covers the handover)."""
    await roles.create("every-minute")
    store = HangingStore(roles.store)
    scheduler = Scheduler(store, roles.queue, roles.clock, "s1", stall_s=5.0)  # type: ignore[arg-type]
    await scheduler.tick(roles.now)
    assert scheduler.healthy()
    roles.clock.advance(4.9)
    assert scheduler.healthy()  # quiet, not stalled: a tick answered 4.9 s ago

    store.hang.clear()
    scheduler._next_reload = None  # the next tick reads the store ... and hangs
    stuck = asyncio.create_task(scheduler.tick(roles.now))
    await asyncio.sleep(0.05)
    roles.clock.advance(0.2)
    assert not scheduler.healthy()
    assert not stuck.done()

    store.hang.set()  # the link heals: the tick completes and the scheduler is healthy again
    await asyncio.wait_for(stuck, 5)
    assert scheduler.healthy()


class FlakyStore:
    """Wraps the real store; the first ``get_job`` fails as over a connection reset mid-query."""

    def __init__(self, inner: object) -> None:
        self._inner = inner
        self.failed = False
        self.loads_after_failure = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)

    async def get_job(self, *args: object, **kwargs: object) -> object:
        if not self.failed:
            self.failed = True
            raise BackendUnavailableError("the metadata store is unreachable: connection reset")
        return await self._inner.get_job(*args, **kwargs)  # type: ignore[attr-defined]

    async def due_jobs(self, *args: object, **kwargs: object) -> object:
        if self.failed:
            self.loads_after_failure += 1
        return await self._inner.due_jobs(*args, **kwargs)  # type: ignore[attr-defined]


async def test_a_store_outage_while_reading_a_changed_job_does_not_stop_the_scheduler(roles: Roles) -> None:
    """Found by the chaos suite's long profile: the change notifications were read outside the
    loop's outage handling, so a connection reset there stopped the scheduler process."""
    job = await roles.create("every-minute")
    store = FlakyStore(roles.store)
    scheduler = Scheduler(store, roles.queue, roles.clock, "s1")  # type: ignore[arg-type]
    changes: asyncio.Queue[str] = asyncio.Queue()
    stop = asyncio.Event()
    changes.put_nowait(job.id)
    running = asyncio.create_task(scheduler.run(changes, stop))
    await wait_until(lambda: store.loads_after_failure > 0 or running.done(), 10)
    stop.set()
    await asyncio.wait_for(running, 5)  # ended by stop, not by the error
    assert store.failed
    assert store.loads_after_failure > 0  # the wheel was rebuilt from the store afterwards
    assert job.id in scheduler.jobs

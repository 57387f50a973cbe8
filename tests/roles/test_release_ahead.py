"""Release to the worker ahead, start at the slot (``Scheduler(release_ahead_s=...)``): an armed
run's trigger is queued a short lead before its slot and carries the slot; the worker holds it
without taking an attempt slot and claims it at the slot; the claim refuses a run before its slot,
so no attempt starts early, and a pause or delete before the slot leaves nothing to start."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any

import pytest
import redis.asyncio as aioredis

from cronwheel.model import RunState
from cronwheel.queue import Delivery, Trigger
from cronwheel.queue.streams import RedisStreamQueue
from cronwheel.scheduler.loop import Scheduler
from cronwheel.worker.loop import Worker
from suite_backends import REDIS_URL

from . import targets
from .harness import Roles, at, wait_until

PENDING, SUCCESS = RunState.PENDING, RunState.SUCCESS


def releasing(roles: Roles, **options: Any) -> Scheduler:
    options.setdefault("arm_ahead_s", 30.0)
    options.setdefault("release_ahead_s", 0.5)
    scheduler = roles.new_scheduler("releaser", **options)
    roles.scheduler = scheduler
    return scheduler


async def released_early(roles: Roles, scheduler: Scheduler, name: str = "job") -> list[Delivery]:
    """A job armed at 0:59 and released at 0:59.9 (one run: the shortest lead, 0.1 s)."""
    await roles.create(name=name)
    await roles.tick(at(0, 59), scheduler)
    await roles.tick(at(0, 59.9), scheduler)
    return await roles.receive()


async def test_released_a_lead_before_the_slot_with_the_slot(roles: Roles) -> None:
    scheduler = releasing(roles)
    assert [scheduler.release_lead(n) for n in (1, 2_000, 8_000, 100_000)] == [0.1, 0.1, 0.4, 0.5]
    await roles.create()
    await roles.tick(at(0, 59), scheduler)
    wake = await roles.tick(at(0, 59.85), scheduler)
    assert await roles.receive() == []
    assert wake == at(0, 59.9)
    await roles.tick(at(0, 59.9), scheduler)
    [run] = await roles.runs()
    assert (run.state, run.queued_at) == (PENDING, at(0, 59.9))  # queued when published, ahead
    [delivery] = await roles.receive()
    assert delivery.trigger == Trigger(run.id, run.job_id, "default", at(1))
    await roles.tick(at(1), scheduler)
    assert await roles.receive() == []  # released once


async def test_the_worker_holds_the_trigger_and_starts_at_the_slot(roles: Roles) -> None:
    scheduler = releasing(roles)
    deliveries = await released_early(roles, scheduler)
    roles.clock.set(at(0, 59.9))
    worker = roles.new_worker("holder", concurrency=1)
    worker.take_in(deliveries)
    assert (len(worker.holding), worker._busy) == (1, 0)  # held: no attempt slot taken
    roles.clock.set(at(1) - timedelta(microseconds=1))
    assert worker.release_due(roles.now) == 0
    [run] = await roles.runs()
    assert run.state is PENDING
    roles.clock.set(at(1))
    assert worker.release_due(roles.now) == 1
    await wait_until(lambda: len(targets.calls) == 1 and worker._busy == 0 and not worker._recording)
    done = await roles.store.get_run(run.id)
    assert (done.state, done.started_at, done.slot) == (SUCCESS, at(1), at(1))
    assert await roles.receive() == []  # acknowledged at the claim


async def test_a_trigger_taken_before_its_slot_starts_no_attempt(roles: Roles) -> None:
    scheduler = releasing(roles)
    [delivery] = await released_early(roles, scheduler)
    roles.clock.set(at(0, 59.95))
    assert await roles.worker.handle(delivery) is None  # the claim refuses it: not its slot yet
    await roles.queue.ack("default", [delivery])
    [run] = await roles.runs()
    assert (run.state, run.started_at, await roles.attempts(run.id)) == (PENDING, None, [])
    assert await roles.receive() == []  # put back until its slot
    roles.clock.set(at(1))
    [done] = await roles.work()
    assert done is not None
    assert (done.state, done.started_at) == (SUCCESS, at(1))


async def test_a_pause_before_the_slot_leaves_the_held_trigger_nothing_to_start(roles: Roles) -> None:
    scheduler = releasing(roles)
    deliveries = await released_early(roles, scheduler)
    worker = roles.new_worker("holder")
    worker.take_in(deliveries)
    job = await roles.store.get_job(deliveries[0].trigger.job_id)
    roles.clock.set(at(0, 59.95))
    await roles.service.pause(job.id, "before the slot")
    await roles.notify(scheduler)
    assert await roles.runs() == []  # the released run went with the pause
    roles.clock.set(at(1))
    assert worker.release_due(roles.now) == 1
    await wait_until(lambda: worker._busy == 0 and not worker._tasks)
    assert targets.calls == []
    assert await roles.runs() == []
    assert await roles.queue.depth("default") == 0  # the trigger was dropped, not put back


async def test_held_triggers_take_no_attempt_slot_and_are_bounded(roles: Roles) -> None:
    scheduler = releasing(roles)
    early: list[Delivery] = []
    for n in range(3):
        await roles.create(name=f"early-{n}")
    await roles.tick(at(0, 59), scheduler)
    await roles.tick(at(0, 59.9), scheduler)
    early = await roles.receive()
    assert len(early) == 3
    worker = roles.new_worker("holder", concurrency=1, hold_most=3)
    worker.take_in(early)
    assert (len(worker.holding), worker.holding.room(), worker._busy) == (3, 0, 0)
    manual = await roles.create(name="now", schedule="0 0 1 1 *")
    await roles.service.trigger(manual.id)
    [now] = await roles.receive()
    worker.take_in([now])  # due: claimed at once, beside the three held
    await wait_until(lambda: len(targets.calls) == 1 and worker._busy == 0 and not worker._recording)
    assert [call.execution_id for call in targets.calls] == [now.trigger.run_id]
    roles.clock.set(at(1))
    worker.release_due(roles.now)  # three due, one attempt slot: one after the other
    await wait_until(lambda: len(targets.calls) == 4 and worker._busy == 0 and not worker._recording)
    runs = [run for run in await roles.runs() if run.job_id != manual.id]
    assert [(run.state, run.started_at) for run in runs] == [(SUCCESS, at(1))] * 3


async def test_the_timer_hands_over_at_the_slot(roles: Roles) -> None:
    scheduler = releasing(roles)
    deliveries = await released_early(roles, scheduler)
    roles.clock.set(at(1) - timedelta(milliseconds=30))  # the timer's wait: 30 ms of real time
    worker: Worker = roles.new_worker("holder")
    worker.take_in(deliveries)
    await wait_until(lambda: worker._timer is not None and not worker._timer.done())
    assert targets.calls == []
    roles.clock.set(at(1))
    await wait_until(lambda: len(targets.calls) == 1 and worker._busy == 0 and not worker._recording)
    [run] = await roles.runs()
    assert (run.state, run.started_at) == (SUCCESS, at(1))


@pytest.fixture
async def redis_queues(roles: Roles) -> AsyncIterator[Callable[[], RedisStreamQueue]]:
    """Redis Streams queues (think: processes) on the live Redis under this test's own prefix,
    with a visibility timeout of 0.3 real seconds (Redis measures idle time itself)."""
    prefix = f"cw-test-{uuid.uuid4().hex[:10]}"
    made: list[RedisStreamQueue] = []

    def make() -> RedisStreamQueue:
        made.append(RedisStreamQueue(REDIS_URL, roles.clock, prefix=prefix, visibility_timeout_s=0.3))
        return made[-1]

    yield make
    client = aioredis.Redis.from_url(REDIS_URL)
    keys = [key async for key in client.scan_iter(match=f"{prefix}:*")]
    if keys:
        await client.delete(*keys)
    await client.aclose()
    for queue in made:
        await queue.close()


async def test_a_worker_killed_holding_a_trigger_loses_nothing(
    roles: Roles, redis_queues: Callable[[], RedisStreamQueue]
) -> None:
    streams = redis_queues()
    scheduler = Scheduler(roles.store, streams, roles.clock, "releaser", arm_ahead_s=30.0)
    roles.scheduler = scheduler
    await roles.create()
    await roles.tick(at(0, 59), scheduler)
    await roles.tick(at(0, 59.9), scheduler)
    dying = Worker(roles.store, redis_queues(), roles.executors, roles.clock, "dying")
    taken = await dying.queue.receive("default", "dying", 10, 1.0)
    dying.take_in(taken)
    assert len(dying.holding) == 1
    assert dying._timer is not None
    dying._timer.cancel()  # killed while holding: nothing acknowledged, nothing claimed
    assert (await streams.stats("default")).pending == 1
    [run] = await roles.runs()
    assert (run.state, run.queued_at) == (PENDING, at(0, 59.9))
    roles.clock.set(at(1))
    heir = Worker(roles.store, redis_queues(), roles.executors, roles.clock, "heir")
    await asyncio.sleep(0.35)  # the visibility timeout passes (Redis' clock)
    [again] = await heir.queue.receive("default", "heir", 10, 2.0)
    assert (again.trigger.run_id, again.trigger.slot, again.deliveries) == (run.id, at(1), 2)
    heir.take_in([again])
    await wait_until(lambda: len(targets.calls) == 1 and heir._busy == 0 and not heir._recording)
    done = await roles.store.get_run(run.id)
    assert (done.state, done.started_at, done.attempts) == (SUCCESS, at(1), 1)
    assert (await streams.stats("default")).pending == 0


async def test_a_tick_that_releases_ahead_wakes_again_to_arm_the_next_second(roles: Roles) -> None:
    scheduler = releasing(roles)
    await roles.create(schedule="* * * * * *")  # every second: a lead of 1 s to arm, 0.1 s to release
    assert await roles.tick(at(0, 59), scheduler) == at(0, 59.9)  # 1:00 armed, released at 0:59.9
    assert await roles.tick(at(0, 59.9), scheduler) == at(1)  # 1:01 is armed at 1:00, not later
    assert await roles.tick(at(1), scheduler) == at(1, 0.9)
    armed = [run.slot for run in await roles.runs() if run.queued_at is None]
    assert armed == [at(1, 1)]

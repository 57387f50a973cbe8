"""Each metric the scheduler and worker keep moves when its code path runs: real SQLite store,
MemoryQueue, ManualClock; the test reads the value from the registry before and after."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from cronwheel.clock import ManualClock
from cronwheel.coordinator.local import LocalCoordinator
from cronwheel.model import MisfirePolicy, RetryPolicy, RunState
from cronwheel.queue.memory import MemoryQueue
from cronwheel.scheduler.loop import Scheduler
from cronwheel.store.port import MAX_LOST_ATTEMPTS
from cronwheel.telemetry import metrics

from .harness import Roles, at, wait_until


def value(name: str, **labels: str) -> float:
    return metrics.REGISTRY.get_sample_value(name, labels) or 0.0


async def test_fire_and_start_lateness_and_pending_runs_recorded(roles: Roles) -> None:
    fired = value("cronwheel_runs_recorded_total", state="PENDING", reason="")
    fire_count = value("cronwheel_fire_lateness_seconds_count")
    fire_sum = value("cronwheel_fire_lateness_seconds_sum")
    start_count = value("cronwheel_start_lateness_seconds_count")
    start_sum = value("cronwheel_start_lateness_seconds_sum")
    await roles.create()
    await roles.tick(at(1, 0.25))  # the 12:01 slot, queued 250 ms late
    assert value("cronwheel_runs_recorded_total", state="PENDING", reason="") == fired + 1
    assert value("cronwheel_fire_lateness_seconds_count") == fire_count + 1
    assert value("cronwheel_fire_lateness_seconds_sum") - fire_sum == 0.25
    roles.clock.set(at(1, 2))  # its attempt starts 2 s after the slot
    await roles.work()
    assert value("cronwheel_start_lateness_seconds_count") == start_count + 1
    assert value("cronwheel_start_lateness_seconds_sum") - start_sum == 2.0


async def test_skipped_slots_are_counted_by_reason(roles: Roles) -> None:
    missed = value("cronwheel_runs_recorded_total", state="SKIPPED", reason="misfire")
    await roles.create(misfire=MisfirePolicy(grace_s=5))
    await roles.tick(at(3))  # the 12:01 and 12:02 slots are missed beyond their grace
    assert value("cronwheel_runs_recorded_total", state="SKIPPED", reason="misfire") > missed


async def test_runs_finished_retries_and_attempts_by_team_and_queue(roles: Roles) -> None:
    labels = {"team": "ops", "queue": "default"}
    failed = value("cronwheel_runs_finished_total", state="FAILED", **labels)
    succeeded = value("cronwheel_runs_finished_total", state="SUCCESS", **labels)
    retries = value("cronwheel_retries_total", **labels)
    failures = value("cronwheel_attempts_total", outcome="failure")
    retry = RetryPolicy(max_attempts=3, initial_delay_s=10, multiplier=1, jitter=False)
    await roles.create("failing", payload={"fail": 99}, retry=retry)
    await roles.create("fine")
    await roles.tick(at(1))
    await roles.work()
    for second in (10, 20):
        roles.clock.set(at(1, second))
        await roles.work()
    states = sorted(run.state for run in await roles.runs())
    assert states == [RunState.FAILED, RunState.SUCCESS]
    assert value("cronwheel_runs_finished_total", state="FAILED", **labels) == failed + 1
    assert value("cronwheel_runs_finished_total", state="SUCCESS", **labels) == succeeded + 1
    assert value("cronwheel_retries_total", **labels) == retries + 2
    assert value("cronwheel_attempts_total", outcome="failure") == failures + 3


async def test_a_run_the_sweep_fails_after_lost_workers_counts_as_finished(roles: Roles) -> None:
    """No worker finishes it: the sweep fails it at its last lost attempt, and counts it as the
    worker would have (cronwheel_runs_finished_total{state="FAILED"} by team and queue)."""
    labels = {"state": "FAILED", "team": "ops", "queue": "default"}
    failed = value("cronwheel_runs_finished_total", **labels)
    await roles.create()
    await roles.tick(at(1))
    [run] = await roles.runs()
    for lost in range(1, MAX_LOST_ATTEMPTS + 1):
        assert await roles.store.claim_run(run.id, f"w{lost}", roles.now, roles.now + timedelta(seconds=10))
        roles.clock.advance(11)  # its worker died: the lease expires
        await roles.sweeper.sweep(roles.now)
        assert value("cronwheel_runs_finished_total", **labels) == failed + (lost == MAX_LOST_ATTEMPTS)
    assert (await roles.store.get_run(run.id)).state is RunState.FAILED
    await roles.sweeper.sweep(roles.now + timedelta(seconds=60))
    assert value("cronwheel_runs_finished_total", **labels) == failed + 1  # counted once


async def test_a_trigger_handed_out_again_counts_as_a_reclaim(roles: Roles) -> None:
    reclaims = value("cronwheel_queue_reclaims_total", queue="default")
    await roles.create()
    await roles.tick(at(1))
    assert len(await roles.receive()) == 1  # a worker that never acknowledges (it died)
    assert value("cronwheel_queue_reclaims_total", queue="default") == reclaims
    roles.clock.advance(301)  # past the queue's visibility timeout
    stop = asyncio.Event()
    worker = asyncio.create_task(roles.worker.run(stop, drain_s=1.0))
    try:
        await wait_until(lambda: value("cronwheel_queue_reclaims_total", queue="default") == reclaims + 1)
    finally:
        stop.set()
        await worker
    assert [run.state for run in await roles.runs()] == [RunState.SUCCESS]


def test_team_labels_are_bounded() -> None:
    seen = len(metrics._teams)
    spare = metrics.MAX_TEAM_LABELS - seen
    teams = [f"bounded-{n}" for n in range(spare + 5)]
    labels = [metrics.team_label(team) for team in teams]
    assert labels[:spare] == teams[:spare]
    assert labels[spare:] == [metrics.OTHER_TEAM] * 5
    assert metrics.team_label(teams[0]) == teams[0]  # a labelled team keeps its label
    assert metrics.team_label(None) == ""


async def test_a_shard_lease_the_store_refuses_is_counted(roles: Roles, clock: ManualClock) -> None:
    refused = value("cronwheel_shard_claims_refused_total")
    await roles.store.claim_shards({3: 7, 9: 7}, "newer-node", clock.now())  # newer epochs exist
    ownership = LocalCoordinator("scheduler-2", ("scheduler",), clock)  # epoch 1 for every shard
    await ownership.start()
    scheduler = Scheduler(roles.store, MemoryQueue(clock), clock, "scheduler-2", ownership=ownership)
    await scheduler.tick(clock.now())
    assert value("cronwheel_shard_claims_refused_total") == refused + 2
    assert scheduler.shards is not None
    assert 3 not in scheduler.shards
    assert 4 in scheduler.shards


async def test_a_stale_firing_is_counted(roles: Roles) -> None:
    stale = value("cronwheel_stale_firings_total")
    await roles.create()
    other = roles.new_scheduler("scheduler-2", reload_every_s=3600)
    await other.load(at(0))
    await roles.tick(at(1))
    await roles.tick(at(1), other)  # it holds the job's old cursor: the store refuses its firing
    assert other.stats.stale == 1
    assert value("cronwheel_stale_firings_total") == stale + 1


async def test_a_fenced_firing_is_counted(roles: Roles, clock: ManualClock) -> None:
    fenced = value("cronwheel_fenced_firings_total")
    job = await roles.create()
    ownership = LocalCoordinator("scheduler-2", ("scheduler",), clock)  # epoch 1 for every shard
    await ownership.start()
    scheduler = roles.new_scheduler("scheduler-2", ownership=ownership)
    await scheduler.tick(at(0))  # registers epoch 1 of every shard with the store
    await roles.store.claim_shards({job.shard: 2}, "newer-node", clock.now())  # the shard moved on
    await roles.tick(at(1), scheduler)
    assert scheduler.stats.fenced == 1
    assert value("cronwheel_fenced_firings_total") == fenced + 1


async def test_a_run_the_sweep_queues_again_is_counted(roles: Roles) -> None:
    requeued = value("cronwheel_requeued_runs_total")
    await roles.create()
    await roles.tick(at(1))
    await roles.queue.close()  # the queue lost the trigger
    roles.clock.set(at(1, 31))
    assert await roles.sweeper.sweep(roles.now) == 1
    assert value("cronwheel_requeued_runs_total") == requeued + 1

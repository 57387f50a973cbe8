"""The worker role over the real store and MemoryQueue: claims, outcomes, retries with backoff,
duplicate triggers, manual triggers with an idempotency key."""

from __future__ import annotations

import asyncio
import random
from datetime import timedelta

from cronwheel.model import Outcome, RetryPolicy, RunKind, RunState
from cronwheel.queue import Trigger

from . import targets
from .harness import Roles, at

PENDING, RUNNING, RETRYING = RunState.PENDING, RunState.RUNNING, RunState.RETRYING
SUCCESS, FAILED = RunState.SUCCESS, RunState.FAILED


async def test_claim_then_success_records_one_attempt(roles: Roles) -> None:
    job = await roles.create(payload={"rows": 3})
    await roles.tick(at(1))
    roles.clock.set(at(1, 0.5))
    [run] = await roles.work()

    assert run is not None
    assert (run.state, run.attempts, run.lease_owner, run.lease_expires_at) == (SUCCESS, 1, None, None)
    assert (run.started_at, run.finished_at, run.next_attempt_at) == (at(1, 0.5), at(1, 0.5), None)
    [attempt] = await roles.attempts(run.id)
    assert (attempt.number, attempt.worker, attempt.outcome) == (1, "worker-1", Outcome.SUCCESS)
    assert (attempt.started_at, attempt.finished_at) == (at(1, 0.5), at(1, 0.5))
    assert attempt.output == f"done {run.id} #1"
    [call] = targets.calls
    assert (call.execution_id, call.attempt, call.scheduled_at, call.payload) == (
        run.id,
        1,
        at(1),
        {"rows": 3},
    )
    events = await roles.store.list_events(run.id)
    assert [(e.previous, e.state, e.attempt, e.node) for e in events] == [
        (None, PENDING, 0, None),
        (PENDING, RUNNING, 1, "worker-1"),
        (RUNNING, SUCCESS, 1, "worker-1"),
    ]
    assert [e.at for e in events] == [at(1), at(1, 0.5), at(1, 0.5)]
    assert job.id == run.job_id
    assert await roles.receive() == []  # acked: never handed out again
    roles.clock.advance(3600)
    assert await roles.receive() == []


async def test_failures_retry_with_backoff_until_attempts_are_exhausted(roles: Roles) -> None:
    retry = RetryPolicy(max_attempts=3, initial_delay_s=10, multiplier=3, jitter=False)
    await roles.create(payload={"fail": 99}, retry=retry)
    await roles.tick(at(1))
    [run] = await roles.work()
    assert run is not None
    assert run.state is RETRYING
    assert run.next_attempt_at == at(1, 10)  # initial_delay_s

    roles.clock.set(at(1, 9.999))
    assert await roles.receive() == []  # the delayed trigger is not handed out early
    roles.clock.set(at(1, 10))
    [again] = await roles.work()
    assert again is not None
    assert again.id == run.id
    assert again.state is RETRYING
    assert again.next_attempt_at == at(1, 40)  # 10 * 3

    roles.clock.set(at(1, 39.9))
    assert await roles.receive() == []
    roles.clock.set(at(1, 45))  # a late worker: the trigger is there, due since 12:01:40
    [last] = await roles.work()
    assert last is not None
    assert last.state is FAILED
    assert last.attempts == 3
    assert last.next_attempt_at is None
    assert last.finished_at == at(1, 45)

    attempts = await roles.attempts(run.id)
    assert [(a.number, a.outcome, a.error) for a in attempts] == [
        (n, Outcome.FAILURE, f"RuntimeError: planned failure of attempt {n}") for n in (1, 2, 3)
    ]
    assert [(a.started_at, a.finished_at) for a in attempts] == [
        (at(1), at(1)),
        (at(1, 10), at(1, 10)),
        (at(1, 45), at(1, 45)),
    ]
    assert [(c.execution_id, c.attempt) for c in targets.calls] == [(run.id, 1), (run.id, 2), (run.id, 3)]
    assert await roles.history(run.id) == [PENDING, RUNNING, RETRYING, RUNNING, RETRYING, RUNNING, FAILED]
    roles.clock.advance(3600)
    assert await roles.receive() == []
    await roles.audit()


async def test_a_retry_that_succeeds(roles: Roles) -> None:
    await roles.create(
        payload={"fail": 1}, retry=RetryPolicy(max_attempts=5, initial_delay_s=2, jitter=False)
    )
    await roles.tick(at(1))
    [first] = await roles.work()
    assert first is not None
    assert first.next_attempt_at == at(1, 2)
    roles.clock.set(at(1, 2))
    [done] = await roles.work()
    assert done is not None
    assert done.state is SUCCESS
    assert done.attempts == 2
    assert [a.outcome for a in await roles.attempts(done.id)] == [Outcome.FAILURE, Outcome.SUCCESS]
    assert await roles.history(done.id) == [PENDING, RUNNING, RETRYING, RUNNING, SUCCESS]


async def test_jittered_backoff_follows_the_seeded_rng(roles: Roles) -> None:
    retry = RetryPolicy(max_attempts=4, initial_delay_s=8, multiplier=2, max_delay_s=12, jitter=True)
    await roles.create(payload={"fail": 99}, retry=retry)
    worker = roles.new_worker("worker-j", rng=random.Random(42))
    twin = random.Random(42)
    await roles.tick(at(1))
    expected_at = at(1)
    for ceiling in (8.0, 12.0, 12.0):  # 8, 16 capped at 12, 32 capped at 12
        [run] = await roles.work(worker)
        assert run is not None
        assert run.state is RETRYING
        delay = ceiling * twin.random()
        expected_at += timedelta(seconds=delay)
        assert run.next_attempt_at is not None
        assert abs((run.next_attempt_at - expected_at).total_seconds()) < 1e-6
        expected_at = run.next_attempt_at
        roles.clock.set(run.next_attempt_at - timedelta(milliseconds=1))
        assert await roles.receive() == []
        roles.clock.set(run.next_attempt_at)
    [last] = await roles.work(worker)
    assert last is not None
    assert last.state is FAILED
    assert last.attempts == 4


async def test_an_early_trigger_for_a_retry_is_put_back_until_its_time(roles: Roles) -> None:
    await roles.create(
        payload={"fail": 1}, retry=RetryPolicy(max_attempts=2, initial_delay_s=30, jitter=False)
    )
    await roles.tick(at(1))
    [run] = await roles.work()
    assert run is not None
    assert run.next_attempt_at == at(1, 30)

    await roles.queue.publish([Trigger(run.id, run.job_id)])  # e.g. a duplicate from the queue
    assert await roles.work() == [None]  # not claimable yet: no attempt started
    assert (await roles.store.get_run(run.id)).attempts == 1
    assert await roles.queue.depth("default") == 2  # the worker's retry trigger and the put-back one

    roles.clock.set(at(1, 30))
    outcomes = await roles.work()
    assert [r.state if r else None for r in outcomes] == [SUCCESS, None]
    assert [c.attempt for c in targets.calls] == [1, 2]
    await roles.audit()


async def test_a_trigger_delivered_twice_starts_one_attempt(roles: Roles) -> None:
    await roles.create()
    await roles.tick(at(1))
    [run] = await roles.runs()
    await roles.queue.publish([Trigger(run.id, run.job_id)])  # the sweep re-queued it as well
    outcomes = await roles.work()
    assert [r.state if r else None for r in outcomes] == [SUCCESS, None]
    assert len(targets.calls) == 1
    assert len(await roles.attempts(run.id)) == 1


async def test_two_workers_racing_for_one_run(roles: Roles) -> None:
    await roles.create()
    await roles.tick(at(1))
    [run] = await roles.runs()
    await roles.queue.publish([Trigger(run.id, run.job_id)])
    first, second = await roles.receive()
    other = roles.new_worker("worker-2")
    targets.hangs.append(0.05)  # the first attempt is still running when the other claims
    outcomes = await asyncio.gather(roles.worker.handle(first), other.handle(second))
    assert sorted(r.state.value if r else "-" for r in outcomes) == ["-", "SUCCESS"]
    assert len(targets.calls) == 1
    assert [a.number for a in await roles.attempts(run.id)] == [1]


async def test_an_unclaimed_trigger_comes_back_and_a_claimed_one_does_not(roles: Roles) -> None:
    await roles.create()
    await roles.tick(at(1))
    [delivery] = await roles.receive()  # the worker dies before it claims the run
    roles.clock.advance(301)  # MemoryQueue's visibility timeout
    [again] = await roles.receive()
    assert again.trigger == delivery.trigger
    assert again.deliveries == 2
    done = await roles.worker.handle(again)  # claimed, then acknowledged at once
    assert done is not None
    assert done.state is SUCCESS
    roles.clock.advance(301)
    assert await roles.receive() == []
    assert len(targets.calls) == 1


async def test_a_timeout_is_an_outcome(roles: Roles) -> None:
    await roles.create(timeout_s=0.05)
    await roles.tick(at(1))
    targets.hangs.append(5.0)
    [run] = await roles.work()
    assert run is not None
    assert run.state is FAILED
    [attempt] = await roles.attempts(run.id)
    assert attempt.outcome is Outcome.TIMEOUT
    assert targets.cancelled == [run.id]


async def test_trigger_now_with_an_idempotency_key_returns_the_same_run(roles: Roles) -> None:
    job = await roles.create()
    roles.clock.set(at(0, 20))
    run, created = await roles.service.trigger(job.id, {"x": 1}, has_payload=True, idempotency_key="k-1")
    again, created_again = await roles.service.trigger(
        job.id, {"x": 2}, has_payload=True, idempotency_key="k-1"
    )
    assert (created, created_again) == (True, False)
    assert again.id == run.id
    assert again.payload == {"x": 1}
    assert (run.kind, run.slot, run.state) == (RunKind.MANUAL, at(0, 20), PENDING)
    assert again.queued_at == at(0, 20)  # the returned record predates mark_queued; the store has it
    assert await roles.queue.depth("default") == 1  # one trigger only

    [done] = await roles.work()
    assert done is not None
    assert done.state is SUCCESS
    [call] = targets.calls
    assert (call.execution_id, call.payload, call.scheduled_at) == (run.id, {"x": 1}, at(0, 20))

    later, created_later = await roles.service.trigger(job.id, idempotency_key="k-1")
    assert (later.id, later.state, created_later) == (run.id, SUCCESS, False)
    other, created_other = await roles.service.trigger(job.id, idempotency_key="k-2")
    assert created_other
    assert other.id != run.id
    unkeyed = [await roles.service.trigger(job.id) for _ in range(2)]
    assert all(created for _, created in unkeyed)
    assert unkeyed[0][0].id != unkeyed[1][0].id
    assert [r.state if r else None for r in await roles.work()] == [SUCCESS] * 3
    await roles.audit()

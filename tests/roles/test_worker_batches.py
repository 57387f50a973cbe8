"""The worker's batches: what several receives hand over is claimed in one store call, a receive
with few slots free waits (at most ``gather_s``) for more, and the acknowledgement follows the
claim. Over the real store and MemoryQueue, time by the ManualClock; the tests wait only for
the worker's own tasks to get there (``wait_until``), never for a timer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime

from cronwheel.errors import BackendUnavailableError
from cronwheel.model import Finish, Job, Outcome, Run, RunState
from cronwheel.queue import Trigger
from cronwheel.worker.loop import Worker

from . import targets
from .harness import Roles, at, wait_until

SUCCESS = RunState.SUCCESS


class GatedClaims:
    """Wraps the store's claim: records each call's run ids; a call waits while ``gate`` is
    closed, and fails with ``fail`` when one is set."""

    def __init__(self, roles: Roles) -> None:
        self.calls: list[list[str]] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.fail: Exception | None = None
        self._claim = roles.store.claim_runs_with_jobs

        async def claim(
            run_ids: Sequence[str], worker: str, now: datetime, lease_until: datetime
        ) -> dict[str, tuple[Run, Job | None]]:
            self.calls.append(list(run_ids))
            await self.gate.wait()
            if self.fail is not None:
                raise self.fail
            return await self._claim(run_ids, worker, now, lease_until)

        roles.store.claim_runs_with_jobs = claim  # type: ignore[method-assign]


@asynccontextmanager
async def running(worker: Worker) -> AsyncIterator[None]:
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run(stop, drain_s=5.0))
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)


async def held_back(roles: Roles, count: int) -> list[Run]:
    """``count`` runs recorded at 12:01, their triggers taken off the queue: the test publishes
    each when it wants the worker to see it."""
    for n in range(count):
        await roles.create(name=f"job-{n}")
    await roles.tick(at(1))
    taken = await roles.receive()
    await roles.queue.ack("default", taken)
    assert len(taken) == count
    return await roles.runs()


async def publish(roles: Roles, *runs: Run) -> None:
    await roles.queue.publish([Trigger(run.id, run.job_id) for run in runs])


async def drained(roles: Roles) -> None:
    """Wait until the worker has taken every trigger off the queue."""
    async with asyncio.timeout(3):
        while await roles.queue.depth("default"):
            await asyncio.sleep(0.005)


async def states(roles: Roles) -> list[RunState]:
    return [run.state for run in await roles.runs()]


async def test_what_arrives_during_a_claim_is_claimed_together_in_the_next(roles: Roles) -> None:
    first, *later = await held_back(roles, 4)
    claims = GatedClaims(roles)
    claims.gate.clear()
    worker = roles.new_worker("worker-2", concurrency=8, gather_s=0)
    async with running(worker):
        await publish(roles, first)
        await wait_until(lambda: len(claims.calls) == 1)  # the first claim is in flight
        await publish(roles, later[0])
        await drained(roles)
        await publish(roles, later[1], later[2], later[0])  # later[0] delivered twice
        await drained(roles)  # received (three receives) while the claim waits
        claims.gate.set()
        await wait_until(lambda: len(targets.calls) == 4 and worker._busy == 0 and not worker._recording)
    assert claims.calls[0] == [first.id]
    assert sorted(claims.calls[1]) == sorted([later[0].id, *(run.id for run in later)])  # one call
    assert len(claims.calls) == 2
    assert await states(roles) == [SUCCESS] * 4
    assert sorted(call.execution_id for call in targets.calls) == sorted([first.id, *(r.id for r in later)])
    assert [len(await roles.attempts(run.id)) for run in later] == [1, 1, 1]  # the duplicate: nothing
    assert await roles.receive() == []  # every trigger acknowledged, the duplicate's too


async def test_a_receive_with_few_free_slots_waits_for_more(roles: Roles) -> None:
    *first, late = await held_back(roles, 17)
    targets.hangs.extend([0.0] + [60.0] * 15)  # one attempt ends at once, fifteen hang
    worker = roles.new_worker("worker-2", concurrency=16, gather_s=3600)  # a batch: 2 free slots
    worker.finisher.gather_s = 0  # outcomes written at once
    async with running(worker):
        await publish(roles, *first)
        await wait_until(lambda: len(targets.calls) == 16 and len(worker._attempts) == 15)
        await wait_until(lambda: worker._busy == 15)
        await publish(roles, late)
        for _ in range(20):
            await asyncio.sleep(0)
        assert await roles.queue.depth("default") == 1  # one slot free: the receive waits for two
        hung = next(run.id for run in first if run.id in worker._attempts)
        await roles.store.request_cancel([hung], roles.now)
        await worker.check_cancellations()  # a second slot frees: the receive goes on at once
        await wait_until(lambda: len(targets.calls) == 17)
        assert targets.calls[-1].execution_id == late.id
        for held in list(worker._attempts.values()):
            held.work.cancel()
        await wait_until(lambda: not worker._attempts)
    assert [a.outcome for a in await roles.attempts(hung)] == [Outcome.CANCELLED]


async def test_a_failed_claim_leaves_its_triggers_unacknowledged(roles: Roles) -> None:
    runs = await held_back(roles, 3)
    claims = GatedClaims(roles)
    claims.fail = BackendUnavailableError("the store is down")
    worker = roles.new_worker("worker-2", concurrency=8, gather_s=0)
    async with running(worker):
        await publish(roles, *runs)
        await wait_until(lambda: len(claims.calls) == 1)
        await wait_until(lambda: worker._busy == 0)  # the slots are given back
    assert sorted(claims.calls[0]) == sorted(run.id for run in runs)
    assert targets.calls == []
    assert await states(roles) == [RunState.PENDING] * 3
    roles.clock.advance(3600)  # past the visibility timeout: they come back
    assert sorted(d.trigger.run_id for d in await roles.receive()) == sorted(run.id for run in runs)


async def test_a_slot_frees_when_its_attempt_returns_while_few_outcomes_wait(roles: Roles) -> None:
    """A slot stands for an attempt running: it is given back once the executor returns, before
    the outcome is written, while fewer than ``concurrency`` outcomes wait to be written."""
    runs = await held_back(roles, 3)
    gate = asyncio.Event()
    writes: list[list[str]] = []
    finish_attempts = roles.store.finish_attempts

    async def gated(finishes: Sequence[Finish], worker: str, now: datetime) -> dict[str, Run]:
        writes.append([finish.run_id for finish in finishes])
        await gate.wait()
        return await finish_attempts(finishes, worker, now)

    roles.store.finish_attempts = gated  # type: ignore[method-assign]
    worker = roles.new_worker("worker-2", concurrency=1, gather_s=0)
    async with running(worker):
        await publish(roles, *runs)
        await wait_until(lambda: len(targets.calls) == 2)  # the second ran while the first's outcome waits
        for _ in range(20):
            await asyncio.sleep(0)
        assert len(targets.calls) == 2  # two outcomes wait: the second attempt keeps its slot
        assert await states(roles) == [RunState.RUNNING] * 2 + [RunState.PENDING]
        gate.set()
        await wait_until(lambda: len(targets.calls) == 3 and worker._busy == 0 and not worker._recording)
    assert await states(roles) == [SUCCESS] * 3
    assert writes[0] == [targets.calls[0].execution_id]

"""The roles read what a batch needs in one store call, not one call per item: a
scheduler re-reads the jobs of a stale batch with one ``get_jobs``, a worker looks up the triggers
it could not claim with one ``get_runs``."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any, cast

from cronwheel.model import RetryPolicy, RunState
from cronwheel.queue import Trigger
from cronwheel.store import Store
from cronwheel.store.sql import SqlStore

from .harness import Roles, at


class CallCounter:
    """Wraps the real store; counts calls per method name and keeps the ids each batch read got."""

    def __init__(self, inner: Store) -> None:
        self._inner = inner
        self.calls: Counter[str] = Counter()
        self.batches: list[list[str]] = []

    @property
    def write_concurrency(self) -> int:
        return self._inner.write_concurrency

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._inner, name)

        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            if name in ("get_jobs", "get_runs"):
                self.batches.append(sorted(args[0]))
            return await method(*args, **kwargs)

        return counted


async def test_a_stale_batch_is_read_again_in_one_store_call(roles: Roles) -> None:
    jobs = [await roles.create(f"job-{n}") for n in range(5)]
    store = CallCounter(roles.store)
    late = roles.new_scheduler("late", store=cast(SqlStore, store), reload_every_s=3600)
    await late.load(at(0))
    await roles.scheduler.load(at(0))
    await roles.tick(at(1))  # the first scheduler fires every job

    store.calls.clear()
    await roles.tick(at(1), late)  # its whole batch is stale
    assert late.stats.stale == 5
    assert (store.calls["get_job"], store.calls["get_jobs"]) == (0, 1)
    assert store.batches == [sorted(job.id for job in jobs)]

    await roles.tick(at(2), late)  # it carries on from the store's cursors
    assert late.stats.fired == 5
    for job in jobs:
        assert [(run.slot, run.state) for run in await roles.runs(job.id)] == [
            (at(1), RunState.PENDING),
            (at(2), RunState.PENDING),
        ]


async def test_triggers_that_cannot_be_claimed_are_looked_up_in_one_store_call(roles: Roles) -> None:
    retry = RetryPolicy(max_attempts=2, initial_delay_s=30, jitter=False)
    retrying = [await roles.create(f"retry-{n}", payload={"fail": 1}, retry=retry) for n in range(3)]
    done = await roles.create("done")
    await roles.tick(at(1))
    outcomes = await roles.work()
    by_job = {run.job_id: run for run in outcomes if run is not None}
    assert {by_job[job.id].state for job in retrying} == {RunState.RETRYING}  # due again at(1, 30)
    assert by_job[done.id].state is RunState.SUCCESS

    store = CallCounter(roles.store)
    worker = roles.new_worker("worker-2")
    worker.store = cast(SqlStore, store)
    early = [Trigger(by_job[job.id].id, job.id) for job in [*retrying, done]]
    await roles.queue.publish([*early, Trigger("no-such-run", done.id)])
    started = await worker.claim(await roles.receive())

    assert started == []  # nothing claimable: three retries not due yet, one finished, one unknown
    assert (store.calls["get_run"], store.calls["get_runs"]) == (0, 1)
    assert store.batches == [sorted([*(t.run_id for t in early), "no-such-run"])]
    assert await roles.receive() == []  # the early ones are put back until their time ...
    roles.clock.set(at(1, 30) + timedelta(milliseconds=1))
    back = Counter(delivery.trigger.run_id for delivery in await roles.receive())
    assert back == {by_job[job.id].id: 2 for job in retrying}  # each: its retry's trigger and the early one

"""Group commit of attempt outcomes: one write at once, what arrives meanwhile goes together next."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import cast

from cronwheel.clock import ManualClock
from cronwheel.errors import BackendUnavailableError
from cronwheel.model import AttemptResult, Finish, Outcome, Run, RunKind, RunState
from cronwheel.store import Store
from cronwheel.worker.finisher import Finisher

START = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
OK = AttemptResult(Outcome.SUCCESS)


class SlowStore:
    """Records each batch; every write waits for ``release`` and can be told to fail."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.release = asyncio.Event()
        self.fail: Exception | None = None

    async def finish_attempts(self, finishes: Sequence[Finish], worker: str, now: datetime) -> dict[str, Run]:
        self.batches.append([finish.run_id for finish in finishes])
        await self.release.wait()
        if self.fail is not None:
            raise self.fail
        return {
            f.run_id: Run(f.run_id, "job", RunKind.SCHEDULED, START, RunState.SUCCESS)
            for f in finishes
            if f.run_id != "lost"
        }


def finisher(store: SlowStore) -> Finisher:
    return Finisher(cast(Store, store), ManualClock(START), "w1")


async def test_outcomes_arriving_during_a_write_go_together_in_the_next() -> None:
    store = SlowStore()
    recorder = finisher(store)
    first = asyncio.create_task(recorder.record(Finish("r0", 1, OK)))
    await asyncio.sleep(0)
    later = [asyncio.create_task(recorder.record(Finish(f"r{n}", 1, OK))) for n in range(1, 5)]
    lost = asyncio.create_task(recorder.record(Finish("lost", 1, OK)))
    await asyncio.sleep(0)
    assert store.batches == [["r0"]]  # the first is written at once, alone
    store.release.set()
    assert (await first) is not None
    runs = await asyncio.gather(*later)
    assert [run.id for run in runs if run is not None] == ["r1", "r2", "r3", "r4"]
    assert await lost is None  # each caller gets its own answer
    assert store.batches == [["r0"], ["r1", "r2", "r3", "r4", "lost"]]


async def test_a_failed_write_fails_every_caller_of_its_batch_and_the_next_batch_goes_on() -> None:
    store = SlowStore()
    recorder = finisher(store)
    store.fail = BackendUnavailableError("down")
    calls = [asyncio.create_task(recorder.record(Finish(f"r{n}", 1, OK))) for n in range(3)]
    store.release.set()
    results = await asyncio.gather(*calls, return_exceptions=True)
    assert all(isinstance(result, BackendUnavailableError) for result in results)
    store.fail = None
    assert await recorder.record(Finish("r9", 1, OK)) is not None
    assert store.batches[-1] == ["r9"]


async def test_with_a_gathering_time_outcomes_wait_for_company_until_enough_have_come() -> None:
    store = SlowStore()
    store.release.set()
    recorder = Finisher(cast(Store, store), ManualClock(START), "w1", gather_s=3600, most=3)
    calls = [asyncio.create_task(recorder.record(Finish(f"r{n}", 1, OK))) for n in range(2)]
    for _ in range(10):
        await asyncio.sleep(0)
    assert store.batches == []  # two of three: they wait (up to an hour here)
    calls.append(asyncio.create_task(recorder.record(Finish("r2", 1, OK))))
    runs = await asyncio.gather(*calls)  # the third makes enough: written at once, together
    assert [run.id for run in runs if run is not None] == ["r0", "r1", "r2"]
    assert store.batches == [["r0", "r1", "r2"]]


async def test_a_lone_outcome_is_written_once_its_gathering_time_is_over() -> None:
    store = SlowStore()
    store.release.set()
    recorder = Finisher(cast(Store, store), ManualClock(START), "w1", gather_s=0.001, most=64)
    run = await asyncio.wait_for(recorder.record(Finish("r0", 1, OK)), 5)
    assert run is not None
    assert store.batches == [["r0"]]

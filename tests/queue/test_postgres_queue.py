"""``PostgresQueue`` beyond the contract: receivers in separate processes (here, separate queue
instances and connection pools on one database) never take the same trigger, a receiver skips
rows another transaction holds instead of waiting for them, and a claim that lapses hands the
trigger out again, by the database's clock, with its delivery count raised."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest
from queue_backends import POSTGRES_VISIBILITY_S, T0, postgres_queue_database
from sqlalchemy import text

from cronwheel.clock import ManualClock
from cronwheel.queue import Delivery, Trigger
from cronwheel.queue.postgres import PostgresQueue
from cronwheel.store.driver import create_engine


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
async def database() -> AsyncIterator[str]:
    async with postgres_queue_database() as url:
        yield url


@pytest.fixture
async def queues(database: str, clock: ManualClock) -> AsyncIterator[Callable[[], PostgresQueue]]:
    """Makes queues (think: worker processes) on one database, each with its own pool."""
    made: list[PostgresQueue] = []

    def make() -> PostgresQueue:
        queue = PostgresQueue(database, clock, visibility_timeout_s=POSTGRES_VISIBILITY_S)
        made.append(queue)
        return queue

    yield make
    for queue in made:
        await queue.close()


async def test_concurrent_receivers_in_separate_processes_never_share_a_trigger(
    queues: Callable[[], PostgresQueue],
) -> None:
    publisher = queues()
    await publisher.publish([Trigger(f"r{i}", "j") for i in range(300)])

    async def drain(queue: PostgresQueue, consumer: str) -> list[Delivery]:
        got: list[Delivery] = []
        while batch := await queue.receive("default", consumer, 5, 0.05):
            got += batch
            await queue.ack("default", batch)
        return got

    results = await asyncio.gather(*(drain(queues(), f"w{i}") for i in range(4)))
    run_ids = [d.trigger.run_id for got in results for d in got]
    assert sorted(run_ids) == sorted(f"r{i}" for i in range(300))  # each exactly once
    assert all(d.deliveries == 1 for got in results for d in got)
    assert await publisher.depth("default") == 0


async def test_a_receiver_skips_rows_another_transaction_holds(
    database: str, queues: Callable[[], PostgresQueue]
) -> None:
    queue = queues()
    await queue.publish([Trigger("held", "j"), Trigger("free", "j")])
    engine = create_engine(database)
    try:
        async with engine.begin() as holder:
            await holder.execute(text("SELECT id FROM triggers WHERE run_id = 'held' FOR UPDATE"))
            got = await asyncio.wait_for(queue.receive("default", "w", 10, 0.1), 5)
            assert [d.trigger.run_id for d in got] == ["free"]  # not blocked by the held row
        (held,) = await queue.receive("default", "w", 10, 0.1)
        assert held.trigger.run_id == "held"
    finally:
        await engine.dispose()


async def test_an_unacked_trigger_comes_back_after_the_visibility_timeout(
    queues: Callable[[], PostgresQueue],
) -> None:
    first, second = queues(), queues()
    await first.publish([Trigger("r", "j")])
    (taken,) = await first.receive("default", "w1", 1, 0.1)
    assert taken.deliveries == 1
    assert await second.receive("default", "w2", 1, 0.05) == []  # claimed: not handed out
    (again,) = await second.receive("default", "w2", 1, 5 * POSTGRES_VISIBILITY_S + 1)
    assert (again.trigger, again.deliveries) == (taken.trigger, 2)
    assert (await second.stats("default")).pending == 1

    await first.ack("default", [taken])  # the lapsed claim's ack leaves the new hand-out alone
    assert await second.depth("default") == 1
    await second.ack("default", [again])
    assert await second.depth("default") == 0
    assert await first.receive("default", "w1", 1, 1.5 * POSTGRES_VISIBILITY_S) == []

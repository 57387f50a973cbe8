"""The ``Queue`` contract, on every backend: the in-process ``MemoryQueue``, the Redis Streams
``RedisStreamQueue`` (on the live Redis) and the ``PostgresQueue`` (on the live PostgreSQL; see
``queue_backends.py``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from queue_backends import T0, Backend, open_backend

from cronwheel.clock import ManualClock
from cronwheel.queue import Delivery, Queue, QueueStats, Trigger


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture(params=["memory", "redis", "postgres"])
async def backend(request: pytest.FixtureRequest, clock: ManualClock) -> AsyncIterator[Backend]:
    async with open_backend(request.param, clock) as opened:
        yield opened


@pytest.fixture
def queue(backend: Backend) -> Queue:
    return backend.queue


async def test_each_trigger_goes_to_one_receiver(queue: Queue) -> None:
    await queue.publish([Trigger(f"r{i}", "j") for i in range(5)])
    first = await queue.receive("default", "w1", 3, 0.1)
    second = await queue.receive("default", "w2", 10, 0.1)
    assert [d.trigger.run_id for d in first] == ["r0", "r1", "r2"]
    assert [d.trigger.run_id for d in second] == ["r3", "r4"]
    assert await queue.receive("default", "w3", 10, 0.05) == []


async def test_a_trigger_released_ahead_keeps_its_slot(backend: Backend) -> None:
    queue = backend.queue
    slot = T0 + timedelta(seconds=1, microseconds=123_457)
    await queue.publish([Trigger("early", "j", slot=slot), Trigger("plain", "j")])
    first, second = await queue.receive("default", "w1", 10, 0.1)
    assert (first.trigger, second.trigger) == (Trigger("early", "j", slot=slot), Trigger("plain", "j"))
    await queue.ack("default", [second])
    await backend.before_visibility_expires()
    await backend.after_visibility_expires()  # handed out again: the slot comes with it
    (again,) = await queue.receive("default", "w2", 1, backend.redelivery_timeout_s)
    assert again.trigger.slot == slot
    await queue.ack("default", [again])
    await backend.long_after()


async def test_queues_are_separate(queue: Queue) -> None:
    await queue.publish([Trigger("a", "j", "fast"), Trigger("b", "j", "slow")])
    assert [d.trigger.run_id for d in await queue.receive("fast", "w", 10, 0.1)] == ["a"]
    assert await queue.depth("slow") == 1


async def test_unacked_triggers_come_back_after_the_visibility_timeout(backend: Backend) -> None:
    queue = backend.queue
    await queue.publish([Trigger("r", "j")])
    (delivery,) = await queue.receive("default", "w1", 1, 0.1)
    assert delivery.deliveries == 1
    await backend.before_visibility_expires()
    assert await queue.receive("default", "w2", 1, 0.05) == []
    await backend.after_visibility_expires()
    (again,) = await queue.receive("default", "w2", 1, backend.redelivery_timeout_s)
    assert again.trigger.run_id == "r"
    assert again.deliveries == 2
    await queue.ack("default", [again])
    await backend.long_after()
    assert await queue.receive("default", "w3", 1, 0.05) == []


async def test_acked_triggers_are_gone(backend: Backend) -> None:
    queue = backend.queue
    await queue.publish([Trigger("r", "j")])
    deliveries = await queue.receive("default", "w", 1, 0.1)
    await queue.ack("default", deliveries)
    await backend.long_after()
    assert await queue.receive("default", "w", 1, 0.05) == []
    assert await queue.depth("default") == 0


async def test_delayed_triggers_wait_for_their_time(queue: Queue, clock: ManualClock) -> None:
    await queue.publish_at(Trigger("later", "j"), T0 + timedelta(seconds=30))
    assert await queue.receive("default", "w", 1, 0.05) == []
    clock.advance(30)
    (delivery,) = await queue.receive("default", "w", 1, 0.1)
    assert delivery.trigger.run_id == "later"


async def test_a_waiting_receiver_wakes_on_publish(queue: Queue) -> None:
    waiting = asyncio.create_task(queue.receive("default", "w", 1, 5.0))
    await asyncio.sleep(0.01)
    await queue.publish([Trigger("r", "j")])
    deliveries = await asyncio.wait_for(waiting, 1.0)
    assert [d.trigger.run_id for d in deliveries] == ["r"]


# -- beyond the original in-process suite ---------------------------------------------------------


async def test_a_delayed_trigger_already_due_is_handed_out_at_once(queue: Queue) -> None:
    await queue.publish_at(Trigger("overdue", "j"), T0 - timedelta(minutes=5))
    (delivery,) = await queue.receive("default", "w", 1, 0.1)
    assert delivery.trigger == Trigger("overdue", "j")
    assert delivery.deliveries == 1


async def test_a_batch_spanning_queues_keeps_each_queues_order(queue: Queue) -> None:
    await queue.publish(
        [Trigger("a1", "j", "a"), Trigger("b1", "j", "b"), Trigger("a2", "j", "a"), Trigger("a3", "j", "a")]
    )
    assert [d.trigger.run_id for d in await queue.receive("a", "w", 10, 0.1)] == ["a1", "a2", "a3"]
    (b,) = await queue.receive("b", "w", 10, 0.1)
    assert b.trigger == Trigger("b1", "j", "b")


async def test_ack_removes_only_the_acked_deliveries(backend: Backend) -> None:
    queue = backend.queue
    await queue.publish([Trigger("done", "j"), Trigger("dropped", "j")])
    done, dropped = await queue.receive("default", "w1", 2, 0.1)
    await queue.ack("default", [done])
    await backend.long_after()
    (again,) = await queue.receive("default", "w2", 10, backend.redelivery_timeout_s)
    assert again.trigger == dropped.trigger
    await queue.ack("default", [again])
    await queue.ack("default", [])  # nothing to do
    assert await queue.depth("default") == 0


async def test_depth_counts_waiting_and_delayed_triggers(queue: Queue, clock: ManualClock) -> None:
    assert await queue.depth("default") == 0
    await queue.publish([Trigger("now1", "j"), Trigger("now2", "j")])
    await queue.publish_at(Trigger("later", "j"), T0 + timedelta(seconds=30))
    assert await queue.depth("default") == 3
    await queue.ack("default", await queue.receive("default", "w", 10, 0.1))
    clock.advance(30)
    await queue.ack("default", await queue.receive("default", "w", 10, 0.1))
    assert await queue.depth("default") == 0


async def test_lag_is_zero_when_nothing_is_waiting(queue: Queue) -> None:
    assert await queue.lag("default") == 0.0
    await queue.publish([Trigger("r", "j")])
    assert await queue.lag("default") >= 0.0
    await queue.ack("default", await queue.receive("default", "w", 1, 0.1))
    assert await queue.lag("default") == 0.0


async def test_concurrent_receivers_share_the_work_without_duplicates(queue: Queue) -> None:
    await queue.publish([Trigger(f"r{i}", "j") for i in range(200)])

    async def drain(consumer: str) -> list[Delivery]:
        got: list[Delivery] = []
        while batch := await queue.receive("default", consumer, 7, 0.05):
            got += batch
            await queue.ack("default", batch)
        return got

    results = await asyncio.gather(*(drain(f"w{i}") for i in range(4)))
    run_ids = [d.trigger.run_id for got in results for d in got]
    assert sorted(run_ids) == sorted(f"r{i}" for i in range(200))
    assert await queue.depth("default") == 0


async def test_stats_count_ready_pending_and_delayed(queue: Queue, clock: ManualClock) -> None:
    assert await queue.stats("default") == QueueStats(0, 0, 0, 0.0)
    await queue.publish([Trigger(f"r{i}", "j") for i in range(3)])
    await queue.publish_at(Trigger("later", "j"), T0 + timedelta(seconds=30))
    assert _counts(await queue.stats("default")) == (3, 0, 1)
    handed = await queue.receive("default", "w", 2, 0.1)
    stats = await queue.stats("default")
    assert _counts(stats) == (1, 2, 1)
    assert stats.lag_s >= 0.0
    await queue.ack("default", handed)
    assert _counts(await queue.stats("default")) == (1, 0, 1)
    assert _counts(await queue.stats("elsewhere")) == (0, 0, 0)


async def test_stats_lag_is_the_age_of_the_oldest_unacknowledged_trigger(backend: Backend) -> None:
    queue = backend.queue
    await queue.publish([Trigger("r", "j")])
    await backend.long_after(5)  # memory: 5 manual seconds; Redis: real time passes
    assert (await queue.stats("default")).lag_s > (0.2 if backend.real_time else 4.9)
    await queue.ack("default", await queue.receive("default", "w", 1, 0.1))
    assert (await queue.stats("default")).lag_s == 0.0


def _counts(stats: QueueStats) -> tuple[int, int, int]:
    return stats.ready, stats.pending, stats.delayed

"""The queue contract, on the in-process queue (the Redis Streams queue will join this suite)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from cronwheel.clock import ManualClock
from cronwheel.queue import Trigger
from cronwheel.queue.memory import MemoryQueue

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def queue(clock: ManualClock) -> MemoryQueue:
    return MemoryQueue(clock, visibility_timeout_s=10)


async def test_each_trigger_goes_to_one_receiver(queue: MemoryQueue) -> None:
    await queue.publish([Trigger(f"r{i}", "j") for i in range(5)])
    first = await queue.receive("default", "w1", 3, 0.1)
    second = await queue.receive("default", "w2", 10, 0.1)
    assert [d.trigger.run_id for d in first] == ["r0", "r1", "r2"]
    assert [d.trigger.run_id for d in second] == ["r3", "r4"]
    assert await queue.receive("default", "w3", 10, 0.05) == []


async def test_queues_are_separate(queue: MemoryQueue) -> None:
    await queue.publish([Trigger("a", "j", "fast"), Trigger("b", "j", "slow")])
    assert [d.trigger.run_id for d in await queue.receive("fast", "w", 10, 0.1)] == ["a"]
    assert await queue.depth("slow") == 1


async def test_unacked_triggers_come_back_after_the_visibility_timeout(
    queue: MemoryQueue, clock: ManualClock
) -> None:
    await queue.publish([Trigger("r", "j")])
    (delivery,) = await queue.receive("default", "w1", 1, 0.1)
    assert delivery.deliveries == 1
    clock.advance(9)
    assert await queue.receive("default", "w2", 1, 0.05) == []
    clock.advance(2)
    (again,) = await queue.receive("default", "w2", 1, 0.1)
    assert again.trigger.run_id == "r"
    assert again.deliveries == 2
    await queue.ack("default", [again])
    clock.advance(60)
    assert await queue.receive("default", "w3", 1, 0.05) == []


async def test_acked_triggers_are_gone(queue: MemoryQueue, clock: ManualClock) -> None:
    await queue.publish([Trigger("r", "j")])
    deliveries = await queue.receive("default", "w", 1, 0.1)
    await queue.ack("default", deliveries)
    clock.advance(60)
    assert await queue.receive("default", "w", 1, 0.05) == []
    assert await queue.depth("default") == 0


async def test_delayed_triggers_wait_for_their_time(queue: MemoryQueue, clock: ManualClock) -> None:
    await queue.publish_at(Trigger("later", "j"), T0 + timedelta(seconds=30))
    assert await queue.receive("default", "w", 1, 0.05) == []
    clock.advance(30)
    (delivery,) = await queue.receive("default", "w", 1, 0.1)
    assert delivery.trigger.run_id == "later"


async def test_a_waiting_receiver_wakes_on_publish(queue: MemoryQueue) -> None:
    waiting = asyncio.create_task(queue.receive("default", "w", 1, 5.0))
    await asyncio.sleep(0.01)
    await queue.publish([Trigger("r", "j")])
    deliveries = await asyncio.wait_for(waiting, 1.0)
    assert [d.trigger.run_id for d in deliveries] == ["r"]

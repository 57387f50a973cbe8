"""What only the Redis Streams queue has: reclaim from silent consumers, dead letters, atomic
promotion, surviving data loss, batch publishing, errors. On the live Redis, one key prefix per test."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any

import pytest
import redis.asyncio as aioredis
from queue_backends import REDIS_VISIBILITY_S, T0, RedisQueues

from cronwheel.clock import ManualClock
from cronwheel.errors import BackendUnavailableError, InvalidInputError
from cronwheel.queue import Delivery, Trigger
from cronwheel.queue.streams import RedisStreamQueue
from cronwheel.telemetry import metrics
from suite_backends import REDIS_URL

MakeQueue = Callable[..., RedisStreamQueue]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
async def make_redis_queue(clock: ManualClock) -> AsyncIterator[MakeQueue]:
    """Queues on the live Redis, under a key prefix of this test's own (deleted afterwards)."""
    queues = RedisQueues(clock)
    yield queues
    await queues.aclose()


@pytest.fixture
async def raw() -> AsyncIterator[aioredis.Redis]:
    """A plain client to look at (and break) the queue's keys."""
    client = aioredis.Redis.from_url(REDIS_URL, decode_responses=True)
    yield client
    await client.aclose()


async def _entries(raw: aioredis.Redis, key: str) -> list[tuple[str, dict[str, str]]]:
    entries: Any = await raw.xrange(key)
    return [(str(entry_id), dict(fields)) for entry_id, fields in entries]


async def _drain(queue: RedisStreamQueue, name: str = "default", limit: int = 1000) -> list[Delivery]:
    got: list[Delivery] = []
    while batch := await queue.receive(name, "drainer", limit, 0.05):
        got += batch
        await queue.ack(name, batch)
    return got


async def test_messages_are_thin_and_acked_entries_leave_the_stream(
    make_redis_queue: MakeQueue, raw: aioredis.Redis
) -> None:
    queue = make_redis_queue()
    await queue.publish([Trigger("run-1", "job-1", "default")])
    ((_, fields),) = await _entries(raw, queue.stream_key("default"))
    assert fields == {"run_id": "run-1", "job_id": "job-1", "queue": "default"}
    (delivery,) = await queue.receive("default", "w", 10, 0.1)
    assert delivery.token == (await _entries(raw, queue.stream_key("default")))[0][0]
    await queue.ack("default", [delivery])
    assert await raw.xlen(queue.stream_key("default")) == 0
    assert await raw.xpending(queue.stream_key("default"), "workers") == {
        "pending": 0,
        "min": None,
        "max": None,
        "consumers": [],
    }


async def test_a_silent_consumers_trigger_is_reclaimed_by_another(
    make_redis_queue: MakeQueue, raw: aioredis.Redis
) -> None:
    first_node, second_node = make_redis_queue(), make_redis_queue()  # two processes
    stream = first_node.stream_key("default")
    await first_node.publish([Trigger("r", "j")])
    (taken,) = await first_node.receive("default", "node-a", 10, 0.1)
    assert (await raw.xpending_range(stream, "workers", "-", "+", 10))[0]["consumer"] == "node-a"

    # node-a goes silent; node-b polls and gets it once the visibility timeout has passed
    started = time.monotonic()
    (reclaimed,) = await second_node.receive("default", "node-b", 10, 3.0)
    waited = time.monotonic() - started
    assert reclaimed.token == taken.token
    assert reclaimed.trigger == taken.trigger
    assert reclaimed.deliveries == 2
    assert waited >= REDIS_VISIBILITY_S * 0.8  # not before the timeout (Redis' idle time)
    (pending,) = await raw.xpending_range(stream, "workers", "-", "+", 10)
    assert pending["consumer"] == "node-b"
    assert pending["times_delivered"] == 2

    await second_node.ack("default", [reclaimed])
    await first_node.ack("default", [taken])  # a late ack of the same entry is harmless
    assert await second_node.depth("default") == 0


async def test_a_restarted_consumer_takes_back_its_unacknowledged_triggers_at_once(
    make_redis_queue: MakeQueue, raw: aioredis.Redis
) -> None:
    before = make_redis_queue(visibility_timeout_s=30.0)  # the process that dies
    stream = before.stream_key("default")
    await before.publish([Trigger(f"r{i}", "j") for i in range(5)])
    mine = await before.receive("default", "node-a", 3, 0.1)
    (theirs,) = await before.receive("default", "node-b", 1, 0.1)
    await before.ack("default", mine[:1])
    await raw.xdel(stream, mine[1].token)  # gone from the stream while pending: nothing to hand out
    await before.publish([Trigger("new", "j")])

    after = make_redis_queue(visibility_timeout_s=30.0)  # node-a again, restarted
    started = time.monotonic()
    (back,) = await after.receive("default", "node-a", 10, 1.0)
    assert time.monotonic() - started < 5.0  # not after the 30 s visibility timeout
    assert (back.token, back.trigger, back.deliveries) == (mine[2].token, mine[2].trigger, 2)
    fresh = await after.receive("default", "node-a", 10, 1.0)  # then on to new entries
    assert [d.trigger.run_id for d in fresh] == ["r4", "new"]
    pending = await raw.xpending_range(stream, "workers", "-", "+", 10)
    assert {p["message_id"]: p["consumer"] for p in pending} == {
        back.token: "node-a",
        theirs.token: "node-b",  # another consumer's: left to the visibility timeout
        **{d.token: "node-a" for d in fresh},
    }
    await after.ack("default", [back, *fresh, theirs])
    assert await after.depth("default") == 0


async def test_a_long_history_comes_back_in_batches(make_redis_queue: MakeQueue) -> None:
    before = make_redis_queue()
    await before.publish([Trigger(f"r{i}", "j") for i in range(7)])
    taken = await before.receive("default", "node-a", 7, 0.1)
    after = make_redis_queue()
    batches = [await after.receive("default", "node-a", 3, 0.1) for _ in range(4)]
    assert [len(batch) for batch in batches] == [3, 3, 1, 0]
    assert [d.token for batch in batches for d in batch] == [d.token for d in taken]
    assert all(d.deliveries == 2 for batch in batches for d in batch)


async def test_a_trigger_handed_out_too_often_is_dead_lettered(
    make_redis_queue: MakeQueue, raw: aioredis.Redis
) -> None:
    buried = _dead_lettered()
    queue = make_redis_queue(visibility_timeout_s=0.15, max_deliveries=2)
    await queue.publish([Trigger("poison", "j"), Trigger("fine", "j")])
    first = await queue.receive("default", "w", 10, 0.1)
    assert [d.deliveries for d in first] == [1, 1]
    await queue.ack("default", [d for d in first if d.trigger.run_id == "fine"])

    (second,) = await queue.receive("default", "w", 10, 2.0)  # silent: handed out again
    assert (second.trigger.run_id, second.deliveries) == ("poison", 2)
    await asyncio.sleep(0.2)
    assert await queue.receive("default", "w", 10, 0.3) == []  # a third time: dead-lettered

    ((_, dead),) = await _entries(raw, queue.dead_key("default"))
    assert dead == {
        "run_id": "poison",
        "job_id": "j",
        "queue": "default",
        "deliveries": "2",
        "entry_id": second.token,
    }
    assert await raw.xlen(queue.stream_key("default")) == 0
    assert await queue.depth("default") == 0
    assert await queue.lag("default") == 0.0
    assert _dead_lettered() == buried + 1  # cronwheel_dead_lettered_total{queue="default"}


async def test_a_restarted_consumer_dead_letters_what_it_was_handed_too_often(
    make_redis_queue: MakeQueue, raw: aioredis.Redis
) -> None:
    buried = _dead_lettered()
    before = make_redis_queue(visibility_timeout_s=30.0, max_deliveries=1)
    await before.publish([Trigger("poison", "j")])
    (taken,) = await before.receive("default", "node-a", 10, 0.1)  # node-a dies holding it
    after = make_redis_queue(visibility_timeout_s=30.0, max_deliveries=1)  # node-a again
    assert await after.receive("default", "node-a", 10, 0.3) == []  # its second time: buried
    ((_, dead),) = await _entries(raw, after.dead_key("default"))
    assert (dead["run_id"], dead["entry_id"]) == ("poison", taken.token)
    assert _dead_lettered() == buried + 1


def _dead_lettered(queue: str = "default") -> float:
    return metrics.REGISTRY.get_sample_value("cronwheel_dead_lettered_total", {"queue": queue}) or 0.0


async def test_concurrent_promoters_move_each_delayed_trigger_once(
    make_redis_queue: MakeQueue, raw: aioredis.Redis, clock: ManualClock
) -> None:
    nodes = [make_redis_queue(promote_batch=13) for _ in range(6)]
    total = 600
    for i in range(total):
        await nodes[i % 6].publish_at(Trigger(f"r{i}", "j"), T0 + timedelta(seconds=i % 10))
    assert await nodes[0].depth("default") == total
    assert await nodes[0].promote_due("default") == 60  # only those due at T0
    clock.advance(10)
    moved = await asyncio.gather(*(node.promote_due("default") for node in nodes))
    assert sum(moved) == total - 60
    assert await raw.zcard(nodes[0].delayed_key("default")) == 0
    assert await raw.xlen(nodes[0].stream_key("default")) == total
    got = await _drain(nodes[0])
    assert Counter(d.trigger.run_id for d in got) == Counter(f"r{i}" for i in range(total))


async def test_concurrent_receivers_promote_each_delayed_trigger_once(
    make_redis_queue: MakeQueue, clock: ManualClock
) -> None:
    nodes = [make_redis_queue(promote_batch=7) for _ in range(5)]
    total = 300
    for i in range(total):
        await nodes[0].publish_at(Trigger(f"r{i}", "j"), T0 + timedelta(seconds=1))
    clock.advance(1)

    async def work(node: RedisStreamQueue, name: str) -> list[str]:
        seen: list[str] = []
        while batch := await node.receive("default", name, 5, 0.1):
            seen += [d.trigger.run_id for d in batch]
            await node.ack("default", batch)
        return seen

    results = await asyncio.gather(*(work(node, f"w{i}") for i, node in enumerate(nodes)))
    assert Counter(r for seen in results for r in seen) == Counter(f"r{i}" for i in range(total))
    assert await nodes[0].depth("default") == 0


async def test_the_queue_survives_losing_its_data(
    make_redis_queue: MakeQueue, raw: aioredis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    queue = make_redis_queue()
    await queue.publish([Trigger("before", "j")])
    (old,) = await queue.receive("default", "w", 10, 0.1)  # the group now exists (and is cached)
    await queue.publish_at(Trigger("held", "j"), T0 + timedelta(hours=1))

    # what a Redis restart without persistence does to our keys
    await raw.delete(queue.stream_key("default"), queue.delayed_key("default"))
    assert await queue.depth("default") == 0
    await queue.publish([Trigger("after", "j")])  # re-creates the stream, not the group
    await queue.ack("default", [old])  # a token from before the loss, and no group: no error
    (new,) = await queue.receive("default", "w", 10, 0.5)  # NOGROUP -> group re-created from 0
    assert new.trigger.run_id == "after"
    await queue.ack("default", [new])
    assert _group_recreations(caplog) == 1

    # a receiver blocked in XREADGROUP when the stream vanishes keeps working
    waiting = asyncio.create_task(queue.receive("default", "w", 10, 3.0))
    await asyncio.sleep(0.1)
    await raw.delete(queue.stream_key("default"))
    await asyncio.sleep(0.05)
    await queue.publish([Trigger("later", "j")])
    (late,) = await asyncio.wait_for(waiting, 3.0)
    assert late.trigger.run_id == "later"
    await queue.ack("default", [late])
    assert _group_recreations(caplog) == 2  # woken with UNBLOCKED, re-created, read again
    assert await queue.depth("default") == 0


async def test_publishing_survives_a_redis_that_forgot_the_script(
    make_redis_queue: MakeQueue, raw: aioredis.Redis
) -> None:
    queue = make_redis_queue()
    await queue.publish([Trigger("before", "j")])
    await raw.script_flush()  # what a Redis restart does to loaded scripts
    await queue.publish([Trigger("after", "j"), Trigger("other", "j", "q2")])
    assert [d.trigger.run_id for d in await _drain(queue)] == ["before", "after"]
    assert [d.trigger.run_id for d in await _drain(queue, "q2")] == ["other"]


def _group_recreations(caplog: pytest.LogCaptureFixture) -> int:
    return sum(getattr(record, "action", None) == "recreate_group" for record in caplog.records)


async def test_a_group_created_by_another_node_is_fine(make_redis_queue: MakeQueue) -> None:
    first, second = make_redis_queue(), make_redis_queue()
    assert await first.receive("default", "a", 1, 0.01) == []  # creates the group
    assert await second.receive("default", "b", 1, 0.01) == []  # BUSYGROUP: already there
    await first.publish([Trigger("r", "j")])
    assert [d.trigger.run_id for d in await second.receive("default", "b", 1, 0.5)] == ["r"]


async def test_depth_and_lag_count_pending_and_overdue_triggers(
    make_redis_queue: MakeQueue, clock: ManualClock
) -> None:
    queue = make_redis_queue()
    await queue.publish([Trigger("a", "j"), Trigger("b", "j")])
    await queue.receive("default", "w", 1, 0.1)  # "a" pending, "b" undelivered
    await queue.publish_at(Trigger("c", "j"), T0 + timedelta(seconds=5))
    assert await queue.depth("default") == 3
    await asyncio.sleep(0.2)
    assert 0.15 <= await queue.lag("default") < 5  # age of "a", by Redis' clock
    clock.advance(65)  # "c" is a minute overdue and nobody promoted it
    assert 59 <= await queue.lag("default") <= 61


async def test_ten_thousand_triggers_in_one_publish(make_redis_queue: MakeQueue, raw: aioredis.Redis) -> None:
    queue = make_redis_queue()
    triggers = [Trigger(f"run-{i:05d}", f"job-{i % 97}") for i in range(10_000)]
    started = time.perf_counter()
    await queue.publish(triggers)
    published_s = time.perf_counter() - started
    assert await raw.xlen(queue.stream_key("default")) == 10_000
    started = time.perf_counter()
    got = await _drain(queue, limit=1000)
    drained_s = time.perf_counter() - started
    print(f"\n10,000 triggers: publish {published_s * 1000:.0f} ms, receive+ack {drained_s * 1000:.0f} ms")
    assert [d.trigger for d in got] == triggers
    assert await queue.depth("default") == 0


async def test_an_unreachable_redis_is_backend_unavailable(clock: ManualClock) -> None:
    queue = RedisStreamQueue("redis://127.0.0.1:1/0", clock, connect_timeout_s=0.5)  # port 1: refused
    try:
        with pytest.raises(BackendUnavailableError):
            await queue.ping()
        with pytest.raises(BackendUnavailableError):
            await queue.publish([Trigger("r", "j")])
        with pytest.raises(BackendUnavailableError):
            await queue.receive("default", "w", 1, 0.1)
        with pytest.raises(BackendUnavailableError):
            await queue.depth("default")
    finally:
        await queue.close()


def test_settings_are_checked(clock: ManualClock) -> None:
    with pytest.raises(InvalidInputError):
        RedisStreamQueue(REDIS_URL, clock, visibility_timeout_s=0)
    with pytest.raises(InvalidInputError):
        RedisStreamQueue(REDIS_URL, clock, max_deliveries=0)
    with pytest.raises(InvalidInputError):
        RedisStreamQueue(REDIS_URL, clock, poll_s=30, socket_timeout_s=10)

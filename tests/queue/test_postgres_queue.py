"""``PostgresQueue`` beyond the contract: receivers in separate processes (here, separate queue
instances and connection pools on one database) never take the same trigger, a receiver skips
rows another transaction holds instead of waiting for them, and a claim that lapses hands the
trigger out again, by the database's clock, with its delivery count raised; a trigger handed out
too often is dead-lettered (counted, kept, the newest ones up to a cap); a publish in one process
wakes a receiver blocked in another through NOTIFY, and a receiver whose listening connection is
lost still gets what is published."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from queue_backends import POSTGRES_VISIBILITY_S, T0, postgres_queue_database
from sqlalchemy import text
from sqlalchemy.engine import make_url

from cronwheel.clock import ManualClock
from cronwheel.errors import BackendUnavailableError
from cronwheel.queue import Delivery, Trigger
from cronwheel.queue.postgres import PostgresQueue, channel
from cronwheel.store.driver import create_engine
from cronwheel.telemetry import metrics
from suite_stores import admin, require_postgres


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
async def database() -> AsyncIterator[str]:
    async with postgres_queue_database() as url:
        yield url


MakeQueue = Callable[..., PostgresQueue]


@pytest.fixture
async def queues(database: str, clock: ManualClock) -> AsyncIterator[MakeQueue]:
    """Makes queues (think: worker processes) on one database, each with its own pool."""
    made: list[PostgresQueue] = []

    def make(**options: Any) -> PostgresQueue:
        options.setdefault("visibility_timeout_s", POSTGRES_VISIBILITY_S)
        queue = PostgresQueue(database, clock, **options)
        made.append(queue)
        return queue

    yield make
    for queue in made:
        await queue.close()


async def test_concurrent_receivers_in_separate_processes_never_share_a_trigger(
    queues: MakeQueue,
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


async def test_a_receiver_skips_rows_another_transaction_holds(database: str, queues: MakeQueue) -> None:
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
    queues: MakeQueue,
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


async def test_a_trigger_handed_out_too_often_is_dead_lettered(database: str, queues: MakeQueue) -> None:
    buried = _dead_lettered()
    queue = queues(max_deliveries=2)
    await queue.publish([Trigger("poison", "j"), Trigger("fine", "j")])
    first = await queue.receive("default", "w", 10, 0.1)
    assert [d.deliveries for d in first] == [1, 1]
    await queue.ack("default", [d for d in first if d.trigger.run_id == "fine"])

    (second,) = await queue.receive("default", "w", 10, 5 * POSTGRES_VISIBILITY_S + 1)  # silent: again
    assert (second.trigger.run_id, second.deliveries) == ("poison", 2)
    await asyncio.sleep(1.2 * POSTGRES_VISIBILITY_S)
    assert await queue.receive("default", "w", 10, 0.3) == []  # a third time: dead-lettered

    assert await _dead_rows(database) == [("default", second.token.split(":")[0], "poison", "j", 2)]
    assert await queue.depth("default") == 0
    assert await queue.lag("default") == 0.0
    assert _dead_lettered() == buried + 1  # cronwheel_dead_lettered_total{queue="default"}
    assert await queue.receive("default", "w", 10, 1.5 * POSTGRES_VISIBILITY_S) == []  # never again


async def test_dead_letters_are_capped_per_queue_keeping_the_newest(database: str, queues: MakeQueue) -> None:
    buried = _dead_lettered()
    queue = queues(max_deliveries=1, dead_letter_max=3)
    for batch in (["a1", "a2", "a3"], ["b1", "b2"]):
        await queue.publish([Trigger(run_id, "j") for run_id in batch])
        assert len(await queue.receive("default", "w", 10, 0.1)) == len(batch)  # never acked
        await asyncio.sleep(1.2 * POSTGRES_VISIBILITY_S)
        assert await queue.receive("default", "w", 10, 0.1) == []  # the second time: buried
    kept = [row[2] for row in await _dead_rows(database)]
    assert len(kept) == 3
    assert {"b1", "b2"} <= set(kept)
    assert _dead_lettered() == buried + 5  # every one counted, kept or not


async def test_concurrent_receivers_burying_at_once_hold_the_cap_exactly(
    database: str, queues: MakeQueue
) -> None:
    holder = queues(max_deliveries=1)
    await holder.publish([Trigger(f"r{i}", "j") for i in range(8)])
    assert len(await holder.receive("default", "w", 10, 0.1)) == 8  # never acked
    await asyncio.sleep(1.2 * POSTGRES_VISIBILITY_S)
    receivers = [queues(max_deliveries=1, dead_letter_max=2) for _ in range(4)]
    await asyncio.gather(*(queue.receive("default", f"w{i}", 2, 0.1) for i, queue in enumerate(receivers)))
    assert len(await _dead_rows(database)) == 2
    assert await holder.depth("default") == 0


async def test_a_restarted_consumer_takes_back_its_unacknowledged_triggers_at_once(
    queues: MakeQueue,
) -> None:
    before = queues(visibility_timeout_s=30.0)  # the process that dies
    await before.publish([Trigger(f"r{i}", "j") for i in range(5)])
    mine = await before.receive("default", "node-a", 3, 0.1)
    (theirs,) = await before.receive("default", "node-b", 1, 0.1)
    await before.ack("default", mine[:1])
    await before.publish([Trigger("new", "j")])

    after = queues(visibility_timeout_s=30.0)  # node-a again, restarted
    started = time.monotonic()
    back = await after.receive("default", "node-a", 10, 1.0)
    assert time.monotonic() - started < 5.0  # not after the 30 s visibility timeout
    assert [(d.trigger, d.deliveries) for d in back] == [(d.trigger, 2) for d in mine[1:]]
    fresh = await after.receive("default", "node-a", 10, 1.0)  # then on to new triggers
    assert [d.trigger.run_id for d in fresh] == ["r4", "new"]
    assert await after.receive("default", "node-b-other", 10, 0.1) == []  # theirs: still held
    await after.ack("default", [*back, *fresh, theirs])
    assert await after.depth("default") == 0


async def test_a_long_history_comes_back_in_batches(queues: MakeQueue) -> None:
    before = queues(visibility_timeout_s=30.0)
    await before.publish([Trigger(f"r{i}", "j") for i in range(7)])
    taken = await before.receive("default", "node-a", 7, 0.1)
    after = queues(visibility_timeout_s=30.0)
    batches = [await after.receive("default", "node-a", 3, 0.1) for _ in range(4)]
    assert [len(batch) for batch in batches] == [3, 3, 1, 0]
    assert [d.trigger for batch in batches for d in batch] == [d.trigger for d in taken]
    assert all(d.deliveries == 2 for batch in batches for d in batch)


async def test_a_restarted_consumer_dead_letters_what_it_was_handed_too_often(
    database: str, queues: MakeQueue
) -> None:
    buried = _dead_lettered()
    before = queues(visibility_timeout_s=30.0, max_deliveries=1)
    await before.publish([Trigger("poison", "j")])
    (taken,) = await before.receive("default", "node-a", 10, 0.1)  # node-a dies holding it
    after = queues(visibility_timeout_s=30.0, max_deliveries=1)  # node-a again
    assert await after.receive("default", "node-a", 10, 0.3) == []  # its second time: buried
    assert [row[1:3] for row in await _dead_rows(database)] == [(taken.token.split(":")[0], "poison")]
    assert _dead_lettered() == buried + 1


async def test_a_publish_in_one_process_wakes_a_receiver_blocked_in_another(
    queues: MakeQueue, clock: ManualClock
) -> None:
    """Not the poll: it is five seconds here (and so is the visibility timeout, which bounds an
    idle wait too)."""
    publisher, receiver = queues(), queues(poll_s=5.0, visibility_timeout_s=5.0)
    await receiver.receive("default", "w", 1, 0.01)  # listening from here on
    publishes: list[Callable[[], Awaitable[None]]] = [
        lambda: publisher.publish([Trigger("now", "j")]),
        lambda: publisher.publish_at(Trigger("due", "j"), clock.now()),
    ]
    for publish in publishes:
        waiting = asyncio.create_task(receiver.receive("default", "w", 1, 10.0))
        await asyncio.sleep(0.2)  # blocked in its wait by now
        started = time.monotonic()
        await publish()
        (got,) = await waiting
        assert time.monotonic() - started < 1.0
        await receiver.ack("default", [got])


async def test_without_listening_a_blocked_receiver_waits_for_its_poll(queues: MakeQueue) -> None:
    """The measure above can fail: the same publish, heard by nobody, waits out the poll."""
    publisher, receiver = queues(), queues(poll_s=2.0, visibility_timeout_s=5.0, listen=False)
    waiting = asyncio.create_task(receiver.receive("default", "w", 1, 10.0))
    await asyncio.sleep(0.2)
    started = time.monotonic()
    await publisher.publish([Trigger("r", "j")])
    assert len(await waiting) == 1
    assert time.monotonic() - started > 1.0


async def test_a_receiver_whose_listener_was_terminated_still_gets_a_publish(
    database: str, queues: MakeQueue
) -> None:
    publisher, receiver = queues(), queues(poll_s=5.0, visibility_timeout_s=5.0)
    await receiver.receive("default", "w", 1, 0.01)
    listening = receiver.listener_pid("default")
    assert listening is not None
    waiting = asyncio.create_task(receiver.receive("default", "w", 1, 10.0))
    await asyncio.sleep(0.2)
    await _terminate(listening)
    started = time.monotonic()
    await publisher.publish([Trigger("r", "j")])
    assert len(await waiting) == 1
    assert time.monotonic() - started < 1.0  # woken by the reconnected listener, not the poll
    assert receiver.listener_pid("default") not in (None, listening)


async def test_a_receiver_that_cannot_listen_polls_and_listens_again_later(
    database: str, queues: MakeQueue
) -> None:
    """The database refuses new connections: the listener cannot reconnect, receives go on
    polling (through the pool's open connections); once it accepts them, listening resumes."""
    publisher, receiver = queues(), queues(poll_s=0.3, listen_retry_s=0.2)
    await publisher.depth("default")  # a pooled connection, open before the refusal
    await receiver.receive("default", "w", 1, 0.01)
    listening = receiver.listener_pid("default")
    assert listening is not None
    await _allow_connections(database, allow=False)
    try:
        await _terminate(listening)
        for run_id in ("r1", "r2"):
            waiting = asyncio.create_task(receiver.receive("default", "w", 1, 5.0))
            await asyncio.sleep(0.1)
            await publisher.publish([Trigger(run_id, "j")])
            (got,) = await asyncio.wait_for(waiting, 2.0)  # by the poll
            assert got.trigger.run_id == run_id
            await receiver.ack("default", [got])
        assert receiver.listener_pid("default") is None
    finally:
        await _allow_connections(database, allow=True)
    for _ in range(50):
        await receiver.receive("default", "w", 1, 0.05)
        if receiver.listener_pid("default") not in (None, listening):
            return
    pytest.fail("the receiver did not listen again")


def test_a_channel_is_named_after_its_queue_and_fits_an_identifier() -> None:
    assert channel("default") == "cronwheel_queue_default"
    long = "q" * 200
    assert len(channel(long).encode()) <= 63
    assert channel(long) != channel(long + "x")


def _dead_lettered(queue: str = "default") -> float:
    return metrics.REGISTRY.get_sample_value("cronwheel_dead_lettered_total", {"queue": queue}) or 0.0


async def _dead_rows(database: str) -> list[tuple[Any, ...]]:
    engine = create_engine(database)
    try:
        async with engine.connect() as connection:
            rows = await connection.execute(
                text("SELECT queue, trigger_id, run_id, job_id, deliveries FROM dead_triggers ORDER BY id")
            )
            return [(q, str(t), r, j, d) for q, t, r, j, d in rows]
    finally:
        await engine.dispose()


async def _terminate(pid: int) -> None:
    """From the suite's administrative connection (the test's database may refuse new ones)."""
    await admin(await require_postgres(), f"SELECT pg_terminate_backend({int(pid)})")


async def _allow_connections(database: str, *, allow: bool) -> None:
    """From the suite's administrative connection: a database cannot refuse its own."""
    value = "true" if allow else "false"
    await admin(
        await require_postgres(), f'ALTER DATABASE "{make_url(database).database}" ALLOW_CONNECTIONS {value}'
    )


async def test_ping_answers_on_a_migrated_database_and_is_unavailable_without_a_server(
    queues: MakeQueue, database: str, clock: ManualClock
) -> None:
    await queues().ping()  # what a process waits for at start
    nowhere = make_url(database).set(host="127.0.0.1", port=1)
    unreachable = PostgresQueue(nowhere.render_as_string(hide_password=False), clock)
    try:
        with pytest.raises(BackendUnavailableError):
            await unreachable.ping()  # waited out (retrying.CONNECT), never a crash
    finally:
        await unreachable.close()

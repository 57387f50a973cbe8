"""``PostgresQueue``: the trigger queue on PostgreSQL, for a cluster that has the store's database
and no Redis.

The ``triggers`` table (``cronwheel.store.schema``, migration 0020) holds one row per trigger not
yet acknowledged. ``publish`` inserts rows; ``receive`` claims up to ``limit`` due rows in one
``UPDATE ... WHERE id IN (SELECT ... FOR UPDATE SKIP LOCKED)``, so concurrent receivers never take
the same row and never wait for each other; a claim lasts the visibility timeout, after which the
row is handed out again with ``deliveries`` raised (at-least-once). ``ack`` deletes a row only if
it is still the claim the delivery's token names (``{id}:{deliveries}``): an ack that comes after
the trigger was handed out again leaves the new hand-out alone.

Two clocks, as the Redis queue has (``cronwheel.queue.streams``):

* **Due times** (``available_at``, the lag) use the injected :class:`~cronwheel.clock.Clock`: the
  scheduler says "run at 12:00:05" by the clock the store and the scheduler share.
* **Visibility** uses the database's ``clock_timestamp()``: a claim's expiry is a duration
  measured by one clock, the server's, so skew between worker nodes does not move it.

Instants are stored as epoch microseconds, as everywhere in the store's schema. An idle receiver
polls every ``poll_s`` (and wakes at once for a publish through the same instance). Not done yet:
dead letters (the Redis queue's ``max_deliveries``); a trigger here is handed out until acked.
Driver errors surface as the store's (:func:`cronwheel.store.driver.translated_errors`):
connection failures and timeouts as :class:`~cronwheel.errors.BackendUnavailableError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import insert, text
from sqlalchemy.ext.asyncio import AsyncEngine

from cronwheel.clock import Clock
from cronwheel.queue.port import Delivery, QueueStats, Trigger
from cronwheel.store.driver import create_engine, translated_errors
from cronwheel.store.schema import from_micros, to_micros
from cronwheel.store.schema import triggers as triggers_table

# Claim expiry by the database's clock, in epoch microseconds (exact: extract yields numeric)
_CLAIM = text(
    """
    WITH clock AS (SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS now_us)
    UPDATE triggers SET claimed_until = (SELECT now_us FROM clock) + :visibility,
                        deliveries = deliveries + 1,
                        consumer = :consumer
    WHERE id IN (
        SELECT id FROM triggers
        WHERE queue = :queue AND available_at <= :due
          AND (claimed_until IS NULL OR claimed_until < (SELECT now_us FROM clock))
        ORDER BY available_at, id
        LIMIT :limit
        FOR UPDATE SKIP LOCKED
    )
    RETURNING id, run_id, job_id, slot, deliveries, available_at
    """
)

_ACK = text("DELETE FROM triggers WHERE id = :id AND deliveries = :deliveries AND queue = :queue")

# Pending: handed out and not acknowledged, expired claims included (as a Redis PEL entry stays
# pending until it is claimed again); ready and delayed: the rest, due or not.
_STATS = text(
    """
    SELECT count(*) FILTER (WHERE claimed_until IS NULL AND available_at <= :due) AS ready,
           count(*) FILTER (WHERE claimed_until IS NOT NULL) AS pending,
           count(*) FILTER (WHERE claimed_until IS NULL AND available_at > :due) AS delayed,
           min(available_at) FILTER (WHERE available_at <= :due) AS oldest
    FROM triggers WHERE queue = :queue
    """
)

_DEPTH = text("SELECT count(*) FROM triggers WHERE queue = :queue")


class PostgresQueue:
    """The ``Queue`` protocol over the ``triggers`` table of the store's PostgreSQL database."""

    def __init__(
        self,
        url: str,
        clock: Clock,
        *,
        visibility_timeout_s: float = 300.0,
        poll_s: float = 0.05,
    ) -> None:
        self._engine: AsyncEngine = create_engine(url)
        self._clock = clock
        self._visibility_us = math.ceil(visibility_timeout_s * 1_000_000)
        self._poll_s = poll_s
        self._wakeups: dict[str, asyncio.Event] = {}

    def _wakeup(self, queue: str) -> asyncio.Event:
        return self._wakeups.setdefault(queue, asyncio.Event())

    def _due(self) -> int:
        return to_micros(self._clock.now())

    async def publish(self, triggers: Sequence[Trigger]) -> None:
        if not triggers:
            return
        now = self._clock.now()
        await self._insert([_row(trigger, now) for trigger in triggers])

    async def publish_at(self, trigger: Trigger, at: datetime) -> None:
        await self._insert([_row(trigger, at)])

    async def _insert(self, rows: list[dict[str, Any]]) -> None:
        with translated_errors():
            async with self._engine.begin() as connection:
                await connection.execute(insert(triggers_table), rows)
        for queue in {row["queue"] for row in rows}:
            self._wakeup(queue).set()

    async def receive(self, queue: str, consumer: str, limit: int, timeout_s: float) -> list[Delivery]:
        loop = asyncio.get_running_loop()
        give_up = loop.time() + timeout_s
        wakeup = self._wakeup(queue)
        while True:
            wakeup.clear()  # before the claim: a publish during it still wakes the wait below
            got = await self._claim(queue, consumer, limit)
            wait = give_up - loop.time()
            if got or wait <= 0:
                return got
            # the poll is the backstop for publishes by other processes, due delayed triggers and
            # expired claims; a publish through this instance wakes the wait at once
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wakeup.wait(), min(wait, self._poll_s))

    async def _claim(self, queue: str, consumer: str, limit: int) -> list[Delivery]:
        values = {
            "queue": queue,
            "consumer": consumer,
            "limit": limit,
            "due": self._due(),
            "visibility": self._visibility_us,
        }
        with translated_errors():
            async with self._engine.begin() as connection:
                claimed = (await connection.execute(_CLAIM, values)).all()
        # RETURNING keeps no order: hand out as the queue orders, by due time then publication
        rows = sorted(claimed, key=lambda row: (row.available_at, row.id))
        return [
            Delivery(
                Trigger(row.run_id, row.job_id, queue, None if row.slot is None else from_micros(row.slot)),
                f"{row.id}:{row.deliveries}",
                row.deliveries,
            )
            for row in rows
        ]

    async def ack(self, queue: str, deliveries: Sequence[Delivery]) -> None:
        claims = [_claim_of(delivery.token) for delivery in deliveries]
        if not claims:
            return
        values = [{"id": row_id, "deliveries": count, "queue": queue} for row_id, count in claims]
        with translated_errors():
            async with self._engine.begin() as connection:
                await connection.execute(_ACK, values)

    async def depth(self, queue: str) -> int:
        """Every trigger not acknowledged: waiting, handed out and delayed (as the Redis queue)."""
        with translated_errors():
            async with self._engine.connect() as connection:
                return int((await connection.execute(_DEPTH, {"queue": queue})).scalar_one())

    async def lag(self, queue: str) -> float:
        return (await self.stats(queue)).lag_s

    async def stats(self, queue: str) -> QueueStats:
        """One aggregate read over the queue's rows (by the index on queue, available_at)."""
        due = self._due()
        with translated_errors():
            async with self._engine.connect() as connection:
                row = (await connection.execute(_STATS, {"queue": queue, "due": due})).one()
        lag = 0.0 if row.oldest is None else max(0.0, (due - int(row.oldest)) / 1_000_000)
        return QueueStats(int(row.ready), int(row.pending), int(row.delayed), lag)

    async def close(self) -> None:
        await self._engine.dispose()


def _row(trigger: Trigger, at: datetime) -> dict[str, Any]:
    return {
        "queue": trigger.queue,
        "run_id": trigger.run_id,
        "job_id": trigger.job_id,
        "slot": trigger.slot,
        "available_at": at,
        "deliveries": 0,
        "claimed_until": None,
        "consumer": None,
    }


def _claim_of(token: str) -> tuple[int, int]:
    """(row id, deliveries) of a delivery token ``{id}:{deliveries}``."""
    row_id, _, count = token.partition(":")
    return int(row_id), int(count)

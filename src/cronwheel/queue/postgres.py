"""``PostgresQueue``: the trigger queue on PostgreSQL, for a cluster that has the store's database
and no Redis.

The ``triggers`` table (``cronwheel.store.schema``, migration 0020) holds one row per trigger not
yet acknowledged. ``publish`` inserts rows; ``receive`` claims up to ``limit`` due rows in one
statement that picks them ``FOR UPDATE SKIP LOCKED``, so concurrent receivers never take the same
row and never wait for each other; a claim lasts the visibility timeout, after which the row is
handed out again with ``deliveries`` raised (at-least-once). ``ack`` deletes a row only if it is
still the claim the delivery's token names (``{id}:{deliveries}``): an ack that comes after the
trigger was handed out again leaves the new hand-out alone. As on Redis, a consumer name's first
receives in an instance take back that name's own live claims first (by row id, in batches of
``limit``): a worker restarted under its node name gets at once what its previous life was handed
and never acknowledged, rather than after the visibility timeout.

Dead letters, as the Redis queue's: a trigger is handed out at most ``max_deliveries`` times
(default 10). The receive that would hand it out once more moves it instead, in the same
statement, from ``triggers`` to ``dead_triggers`` (migration 0022: queue, the ``triggers`` row id,
run, job, slot, the times it was handed out, when, by the database's clock), counts it in
``cronwheel_dead_lettered_total{queue}`` and logs it (``action=dead_letter``). Each queue keeps its
newest ``dead_letter_max`` dead letters (default 100,000; trimmed by the receive that adds some,
under a per-queue advisory lock so that concurrent trims hold the cap exactly). Dead letters are
not counted in ``depth`` nor ``stats``; the store still holds their runs, which the sweep may
queue again.

Wake-ups across processes: a publish of due triggers (``publish``; ``publish_at`` when the time
has come already) sends ``pg_notify(channel, queue name)`` in the transaction of its insert, so a
listener hears of it when, and only if, the rows are visible. The channel is
:func:`channel` of the queue name: ``cronwheel_queue_<name>`` (a digest instead of the name when
that is longer than an identifier may be). A receive first makes sure its process listens on the
queue's channel: one dedicated asyncpg connection per queue name received from
(:class:`~cronwheel.store.change_listener.PostgresChangeListener`, ``application_name``
``cronwheel-queue-listener``), outside the pool. An idle receiver then waits for a notification
and looks again at once; a publish through the same instance wakes it without one. The wait is
bounded by ``poll_s`` (default 1 s), the visibility timeout and the next delayed trigger's due
time, so polling remains the backstop: for expired claims, for triggers delayed by another
process, and while the listener is down. A lost listening connection (server restart,
``pg_terminate_backend``, a failed health check) is re-established with backoff, and then every
receiver looks again, since notifications sent meanwhile are lost; a listener that cannot start
is logged and tried again ``listen_retry_s`` later. Receives never fail because of the listener.

Two clocks, as the Redis queue has (``cronwheel.queue.streams``):

* **Due times** (``available_at``, the lag) use the injected :class:`~cronwheel.clock.Clock`: the
  scheduler says "run at 12:00:05" by the clock the store and the scheduler share.
* **Visibility** uses the database's ``clock_timestamp()``: a claim's expiry is a duration
  measured by one clock, the server's, so skew between worker nodes does not move it.

Instants are stored as epoch microseconds, as everywhere in the store's schema. Driver errors
surface as the store's (:func:`cronwheel.store.driver.translated_errors`): connection failures
and timeouts as :class:`~cronwheel.errors.BackendUnavailableError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import math
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import TextClause, text
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from cronwheel.clock import Clock
from cronwheel.errors import InvalidInputError
from cronwheel.queue.port import Delivery, QueueStats, Trigger
from cronwheel.store.change_listener import PostgresChangeListener
from cronwheel.store.driver import create_engine, translated_errors
from cronwheel.store.schema import from_micros, to_micros
from cronwheel.telemetry import metrics

log = logging.getLogger("cronwheel.queue")

CHANNEL_PREFIX = "cronwheel_queue_"
_CHANNEL_BYTES = 63  # PostgreSQL's longest identifier (NAMEDATALEN - 1): LISTEN truncates beyond it

# One receive step, by the database's clock (epoch microseconds; exact: extract yields numeric):
# pick up to ``limit`` rows (``{pick}``: which, in what order), skipping rows other transactions
# hold; move those already handed out ``max_deliveries`` times to ``dead_triggers``; claim the
# rest for the visibility timeout. Returns both, told apart by ``dead``.
_TAKE_TEMPLATE = """
    WITH clock AS (SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS now_us),
    picked AS MATERIALIZED (
        SELECT id, deliveries FROM triggers
        WHERE queue = :queue AND {pick}
        LIMIT :limit
        FOR UPDATE SKIP LOCKED
    ),
    buried AS (
        DELETE FROM triggers WHERE id IN (SELECT id FROM picked WHERE deliveries >= :max_deliveries)
        RETURNING id, queue, run_id, job_id, slot, deliveries, available_at
    ),
    dead AS (
        INSERT INTO dead_triggers (queue, trigger_id, run_id, job_id, slot, deliveries, dead_at)
        SELECT queue, id, run_id, job_id, slot, deliveries, (SELECT now_us FROM clock) FROM buried
        RETURNING trigger_id
    ),
    claimed AS (
        UPDATE triggers SET claimed_until = (SELECT now_us FROM clock) + :visibility,
                            deliveries = deliveries + 1,
                            consumer = :consumer
        WHERE id IN (SELECT id FROM picked WHERE deliveries < :max_deliveries)
        RETURNING id, run_id, job_id, slot, deliveries, available_at
    )
    SELECT false AS dead, id, run_id, job_id, slot, deliveries, available_at FROM claimed
    UNION ALL
    SELECT true AS dead, id, run_id, job_id, slot, deliveries, available_at FROM buried
"""

# Due rows not held by a live claim, in the queue's order: due time, then publication.
_TAKE = text(
    _TAKE_TEMPLATE.format(
        pick="""available_at <= :due
          AND (claimed_until IS NULL OR claimed_until < (SELECT now_us FROM clock))
        ORDER BY available_at, id"""
    )
)

# The consumer's own live claims past a cursor, by id: what a restarted process was handed under
# its consumer name (node name) and never acknowledged, taken back at once.
_TAKE_BACK = text(
    _TAKE_TEMPLATE.format(
        pick="""consumer = :consumer AND id > :after
          AND claimed_until >= (SELECT now_us FROM clock)
        ORDER BY id"""
    )
)

# When the next trigger not yet due is due (the injected clock's epoch microseconds), if any.
_NEXT_DUE = text("SELECT min(available_at) FROM triggers WHERE queue = :queue AND available_at > :due")

# Keep the newest ``cap`` dead letters of a queue. The lock (per queue, until commit) makes
# concurrent trims take turns, so the second one sees the first one's dead letters: the cap holds.
_TRIM_LOCK = text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))")
_TRIM = text(
    """
    DELETE FROM dead_triggers WHERE queue = :queue AND id <= (
        SELECT id FROM dead_triggers WHERE queue = :queue ORDER BY id DESC OFFSET :cap LIMIT 1
    )
    """
)

_NOTIFY = text("SELECT pg_notify(:channel, :queue)")

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

_PING = text("SELECT 1 FROM triggers LIMIT 1")
# A publish: every trigger in one statement, one array per column (a row at a time through the
# driver costs several times more: the release of a herd publishes tens of thousands at once)
_PUBLISH = text(
    """
    INSERT INTO triggers (queue, run_id, job_id, slot, available_at, deliveries)
    SELECT t.queue, t.run_id, t.job_id, t.slot, t.available_at, 0
    FROM unnest(CAST(:queues AS varchar[]), CAST(:run_ids AS varchar[]), CAST(:job_ids AS varchar[]),
                CAST(:slots AS bigint[]), CAST(:available_at AS bigint[]))
         AS t(queue, run_id, job_id, slot, available_at)
    """
)
_DEPTH = text("SELECT count(*) FROM triggers WHERE queue = :queue")


def channel(queue: str) -> str:
    """The NOTIFY channel of a queue name: ``cronwheel_queue_<name>``, or, for a name too long
    for an identifier, ``cronwheel_queue_`` and a digest of it (the payload is the name itself)."""
    name = CHANNEL_PREFIX + queue
    if len(name.encode()) <= _CHANNEL_BYTES:
        return name
    return CHANNEL_PREFIX + hashlib.sha256(queue.encode()).hexdigest()[:40]


class PostgresQueue:
    """The ``Queue`` protocol over the ``triggers`` table of the store's PostgreSQL database."""

    def __init__(
        self,
        url: str,
        clock: Clock,
        *,
        visibility_timeout_s: float = 300.0,
        poll_s: float = 1.0,
        max_deliveries: int = 10,
        dead_letter_max: int = 100_000,
        listen: bool = True,
        listen_retry_s: float = 5.0,
    ) -> None:
        """Open lazily (no I/O here).

        * ``visibility_timeout_s``: how long a handed-out trigger may stay unacknowledged before
          another receiver gets it (measured by the database's clock).
        * ``poll_s``: the longest an idle receiver waits before it looks again (the backstop for
          NOTIFYs it did not hear, expired claims, and triggers another process delayed).
        * ``max_deliveries``: a trigger is handed out at most this many times; the next receive
          that would hand it out moves it to ``dead_triggers`` instead, where the newest
          ``dead_letter_max`` of each queue are kept. The store still holds the run, so the
          sweep may queue it again later.
        * ``listen``: wait for publishes with ``LISTEN`` (one connection per queue name
          received from); ``listen_retry_s``: after a failed attempt to start listening, how
          long receives poll only before they try again.
        """
        if visibility_timeout_s <= 0 or poll_s <= 0 or max_deliveries < 1 or dead_letter_max < 1:
            raise InvalidInputError(
                "the PostgreSQL queue needs visibility_timeout_s > 0, poll_s > 0, "
                "max_deliveries >= 1 and dead_letter_max >= 1"
            )
        self._url = url
        self._engine: AsyncEngine = create_engine(url)
        self._clock = clock
        self._visibility_s = visibility_timeout_s
        self._visibility_us = math.ceil(visibility_timeout_s * 1_000_000)
        self._poll_s = poll_s
        self._max_deliveries = max_deliveries
        self._dead_letter_max = dead_letter_max
        self._listen = listen
        self._listen_retry_s = listen_retry_s
        self._wakeups: dict[str, asyncio.Event] = {}
        self._listeners: dict[str, PostgresChangeListener] = {}
        self._pumps: dict[str, asyncio.Task[None]] = {}
        self._listen_after: dict[str, float] = {}  # queue -> loop time of the next try to listen
        self._listening = asyncio.Lock()  # one start at a time: concurrent receives share it
        # (queue, consumer) -> how far its own earlier claims were taken back; None: all of them
        self._history: dict[tuple[str, str], int | None] = {}

    def _wakeup(self, queue: str) -> asyncio.Event:
        return self._wakeups.setdefault(queue, asyncio.Event())

    def _due(self) -> int:
        return to_micros(self._clock.now())

    # -- publishing ------------------------------------------------------------------------------

    async def publish(self, triggers: Sequence[Trigger]) -> None:
        if not triggers:
            return
        await self._insert(triggers, self._clock.now(), notify=True)

    async def publish_at(self, trigger: Trigger, at: datetime) -> None:
        await self._insert([trigger], at, notify=at <= self._clock.now())

    async def _insert(self, triggers: Sequence[Trigger], at: datetime, *, notify: bool) -> None:
        """Insert the triggers, available from ``at``, in one statement (one array per column)
        and, when they are due, NOTIFY each of their queues' channels in the same transaction:
        listeners hear of them when, and only if, they are visible."""
        queues = sorted({trigger.queue for trigger in triggers})
        with translated_errors():
            async with self._engine.begin() as connection:
                await connection.execute(_PUBLISH, _columns(triggers, to_micros(at)))
                if notify:
                    notices = [{"channel": channel(queue), "queue": queue} for queue in queues]
                    await connection.execute(_NOTIFY, notices)
        if notify:
            for queue in queues:
                self._wakeup(queue).set()

    # -- receiving -------------------------------------------------------------------------------

    async def receive(self, queue: str, consumer: str, limit: int, timeout_s: float) -> list[Delivery]:
        if limit <= 0:
            return []
        loop = asyncio.get_running_loop()
        give_up = loop.time() + timeout_s
        wakeup = self._wakeup(queue)
        await self._ensure_listening(queue)  # before the first claim: no publish falls between
        if self._history.get((queue, consumer), 0) is not None:
            recovered = await self._take_back(queue, consumer, limit)
            if recovered:
                return recovered
        while True:
            wakeup.clear()  # before the claim: a publish during it still wakes the wait below
            got, buried, next_due_s = await self._take(queue, consumer, limit)
            wait = give_up - loop.time()
            if got or wait <= 0:
                return got
            if buried:
                continue  # dead-lettered rows took the places: look again at once
            # a NOTIFY (or a publish through this instance) wakes the wait at once; the poll is
            # the backstop for expired claims, delayed triggers and notifications not heard
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wakeup.wait(), min(wait, self._poll_s, self._visibility_s, next_due_s))

    async def _take(self, queue: str, consumer: str, limit: int) -> tuple[list[Delivery], int, float]:
        """One claim: the deliveries, how many triggers were dead-lettered, and (when nothing
        was claimed) how long until the next delayed trigger is due, by the injected clock."""
        due = self._due()
        values = self._values(queue, consumer, limit, due=due)
        rows, next_due_s = await self._claim(queue, _TAKE, values, next_due_after=due)
        got = _deliveries(queue, rows)
        return got, len(rows) - len(got), next_due_s

    async def _take_back(self, queue: str, consumer: str, limit: int) -> list[Delivery]:
        """The first receives of a consumer name in this instance: what that name was handed
        before (by a previous process, which died or stopped without acknowledging) comes back
        at once rather than after the visibility timeout, with its delivery count raised (or is
        dead-lettered). Consumer names must be unique among live processes (node names are)."""
        key = (queue, consumer)
        values = self._values(queue, consumer, limit, after=self._history.get(key) or 0)
        rows, _ = await self._claim(queue, _TAKE_BACK, values)
        self._history[key] = max(row.id for row in rows) if len(rows) >= limit else None
        got = _deliveries(queue, rows)
        if rows:
            log.info(
                "took back unacknowledged triggers",
                extra={
                    "action": "recover",
                    "queue": queue,
                    "node": consumer,
                    "count": len(got),
                    "dead_lettered": len(rows) - len(got),
                },
            )
        return got

    def _values(self, queue: str, consumer: str, limit: int, **more: int) -> dict[str, Any]:
        return {
            "queue": queue,
            "consumer": consumer,
            "limit": limit,
            "visibility": self._visibility_us,
            "max_deliveries": self._max_deliveries,
            **more,
        }

    async def _claim(
        self, queue: str, statement: TextClause, values: dict[str, Any], *, next_due_after: int | None = None
    ) -> tuple[list[Row[Any]], float]:
        """Run a take statement; trim the dead letters and count what it dead-lettered. With
        ``next_due_after``, when nothing was claimed: how long until the next delayed trigger."""
        next_due_s = math.inf
        with translated_errors():
            async with self._engine.begin() as connection:
                rows = list((await connection.execute(statement, values)).all())
                buried = sum(1 for row in rows if row.dead)
                if buried:
                    await self._trim(connection, queue)
                if next_due_after is not None and buried == len(rows):
                    next_due_s = await _next_due_s(connection, queue, next_due_after)
        if buried:
            self._count_dead(queue, buried)
        return rows, next_due_s

    async def _trim(self, connection: AsyncConnection, queue: str) -> None:
        await connection.execute(_TRIM_LOCK, {"key": f"cronwheel.dead_triggers:{queue}"})
        await connection.execute(_TRIM, {"queue": queue, "cap": self._dead_letter_max})

    def _count_dead(self, queue: str, count: int) -> None:
        metrics.DEAD_LETTERED.labels(queue).inc(count)
        log.warning(
            "triggers dead-lettered",
            extra={
                "action": "dead_letter",
                "queue": queue,
                "count": count,
                "max_deliveries": self._max_deliveries,
            },
        )

    # -- listening -------------------------------------------------------------------------------

    async def _ensure_listening(self, queue: str) -> None:
        """Listen for the queue's NOTIFYs, if not yet (or no longer: a listener the server refused
        to reconnect ends). A failure to start is logged and retried ``listen_retry_s`` later;
        meanwhile receives poll. Never raises: the claim reports an unavailable database."""
        listener = self._listeners.get(queue)
        if not self._listen or (listener is not None and listener.running):
            return
        async with self._listening:
            await self._restart_listening(queue)

    async def _restart_listening(self, queue: str) -> None:
        listener = self._listeners.get(queue)
        if listener is not None and listener.running:
            return  # another receive started it meanwhile
        loop = asyncio.get_running_loop()
        if loop.time() < self._listen_after.get(queue, 0.0):
            return
        if listener is not None:
            await self._stop_listening(queue)
        try:
            await self._start_listening(queue)
        except Exception as error:  # a receive must go on polling whatever went wrong here
            self._listen_after[queue] = loop.time() + self._listen_retry_s
            log.warning(
                "cannot listen for queue wake-ups; polling",
                extra={"action": "listen", "queue": queue, "error": str(error)},
            )

    async def _start_listening(self, queue: str) -> None:
        listener = PostgresChangeListener(
            self._url,
            channel=channel(queue),
            min_backoff_s=0.05,
            max_backoff_s=self._listen_retry_s,
            name="queue-listener",
            subject=f"queue {queue!r} wake-ups",
            application_name="cronwheel-queue-listener",
        )
        wakes = listener.subscribe()
        await listener.start()
        self._listeners[queue] = listener
        self._pumps[queue] = asyncio.create_task(_pump(wakes, self._wakeup(queue)), name=f"wake {queue}")

    async def _stop_listening(self, queue: str) -> None:
        pump = self._pumps.pop(queue, None)
        if pump is not None:
            pump.cancel()
            await asyncio.wait({pump})
        listener = self._listeners.pop(queue, None)
        if listener is not None:
            await listener.stop()

    def listener_pid(self, queue: str) -> int | None:
        """The PostgreSQL backend listening for the queue's wake-ups (diagnostics, tests)."""
        listener = self._listeners.get(queue)
        return None if listener is None else listener.server_pid

    # -- acknowledging and reading ---------------------------------------------------------------

    async def ack(self, queue: str, deliveries: Sequence[Delivery]) -> None:
        claims = [_claim_of(delivery.token) for delivery in deliveries]
        if not claims:
            return
        values = [{"id": row_id, "deliveries": count, "queue": queue} for row_id, count in claims]
        with translated_errors():
            async with self._engine.begin() as connection:
                await connection.execute(_ACK, values)

    async def ping(self) -> None:
        """Connect and read the ``triggers`` table: what a process waits for at start (a server
        still starting is waited out; a refused login or an unmigrated database is not)."""
        with translated_errors():
            async with self._engine.connect() as connection:
                await connection.execute(_PING)

    async def depth(self, queue: str) -> int:
        """Every trigger not acknowledged: waiting, handed out and delayed (as the Redis queue);
        dead letters are not counted."""
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
        for queue in list(self._listeners):
            await self._stop_listening(queue)
        await self._engine.dispose()


async def _pump(wakes: asyncio.Queue[str], wakeup: asyncio.Event) -> None:
    """Every notification (and the listener's "may have missed some" after a reconnect) wakes
    the queue's receivers."""
    while True:
        await wakes.get()
        wakeup.set()


async def _next_due_s(connection: AsyncConnection, queue: str, due: int) -> float:
    first = (await connection.execute(_NEXT_DUE, {"queue": queue, "due": due})).scalar_one()
    return math.inf if first is None else (int(first) - due) / 1_000_000


def _deliveries(queue: str, rows: list[Row[Any]]) -> list[Delivery]:
    """The claimed rows (not the dead-lettered) as deliveries. RETURNING keeps no order: hand
    out as the queue orders, by due time then publication."""
    return [
        Delivery(
            Trigger(row.run_id, row.job_id, queue, None if row.slot is None else from_micros(row.slot)),
            f"{row.id}:{row.deliveries}",
            row.deliveries,
        )
        for row in sorted(rows, key=lambda row: (row.available_at, row.id))
        if not row.dead
    ]


def _columns(triggers: Sequence[Trigger], at_us: int) -> dict[str, list[Any]]:
    """The parameters of :data:`_PUBLISH`: each column's values, in the triggers' order."""
    return {
        "queues": [trigger.queue for trigger in triggers],
        "run_ids": [trigger.run_id for trigger in triggers],
        "job_ids": [trigger.job_id for trigger in triggers],
        "slots": [None if trigger.slot is None else to_micros(trigger.slot) for trigger in triggers],
        "available_at": [at_us] * len(triggers),
    }


def _claim_of(token: str) -> tuple[int, int]:
    """(row id, deliveries) of a delivery token ``{id}:{deliveries}``."""
    row_id, _, count = token.partition(":")
    return int(row_id), int(count)

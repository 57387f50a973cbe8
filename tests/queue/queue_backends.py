"""Backends for the queue contract suite, and the live Redis and PostgreSQL the tests use.

Redis is the suite's (``suite_backends``: ``CRONWHEEL_TEST_REDIS_URL``, by default database 15 of
``127.0.0.1:6379``). Every test gets its own key prefix and its keys are deleted afterwards; nothing
here flushes the server. Without a reachable server the Redis tests are skipped locally and fail in
CI (``CI`` set): a backend that is not exercised in CI is not tested.

PostgreSQL is the suite's too (``suite_backends``: ``CRONWHEEL_TEST_POSTGRES_URL``): every test gets
a fresh migrated database of its own (``suite_stores``), dropped afterwards. An unreachable server
fails the test; opted out (the URL set empty), the PostgreSQL tests are skipped locally and fail in
CI, as the Redis tests.

The test modules declare their fixtures on top of these helpers. (A module with a unique name,
and no ``conftest.py``: a ``tests/queue`` package would shadow the standard library's ``queue``,
and a second package-less ``conftest`` module would clash with ``tests/integration``'s for mypy.)
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import redis
import redis.asyncio as aioredis

from broker_support import unavailable
from cronwheel.clock import ManualClock
from cronwheel.queue import Queue
from cronwheel.queue.memory import MemoryQueue
from cronwheel.queue.postgres import PostgresQueue
from cronwheel.queue.streams import RedisStreamQueue
from suite_backends import POSTGRES_ENV, POSTGRES_URL, REDIS_ENV, REDIS_URL
from suite_stores import fresh_postgres_database

T0 = datetime(2026, 1, 1, tzinfo=UTC)
REDIS_VISIBILITY_S = 0.3  # real seconds: Redis measures idle time itself
POSTGRES_VISIBILITY_S = 0.5  # real seconds: claims expire by the database's clock

_reachable: bool | None = None


def require_redis() -> str:
    """The test Redis URL; skip (locally) or fail (in CI) when it cannot be reached."""
    global _reachable  # noqa: PLW0603 - one probe per session
    if _reachable is None:
        client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2)
        try:
            _reachable = bool(client.ping())
        except redis.exceptions.RedisError:
            _reachable = False
        finally:
            client.close()
    if not _reachable:
        unavailable(f"no Redis at {REDIS_URL} (set {REDIS_ENV})")
    return REDIS_URL


@asynccontextmanager
async def postgres_queue_database() -> AsyncIterator[str]:
    """The URL of a fresh migrated database for PostgreSQL queues, dropped afterwards; opted out
    (``CRONWHEEL_TEST_POSTGRES_URL`` empty): skipped locally, a failure in CI."""
    if POSTGRES_URL is None:
        unavailable(f"no PostgreSQL for the queue tests ({POSTGRES_ENV} is empty)")
    async with fresh_postgres_database(migrated=True) as url:
        yield url


def new_prefix() -> str:
    return f"cwtest:{uuid.uuid4().hex[:12]}"


async def delete_prefix(prefix: str) -> None:
    client = aioredis.Redis.from_url(REDIS_URL)
    try:
        keys = [key async for key in client.scan_iter(match=f"{prefix}:*", count=1000)]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


@dataclass
class Backend:
    """A queue under test plus how to let its visibility timeout pass.

    The in-process queue measures visibility with the manual clock; Redis measures idle time with
    its own clock, so on Redis "almost expired" is simply "just handed out" and "expired" means
    waiting (a receive with a timeout longer than the visibility polls for the re-delivery).
    """

    name: str
    queue: Queue
    clock: ManualClock
    visibility_s: float

    @property
    def real_time(self) -> bool:
        return self.name in ("redis", "postgres")

    @property
    def redelivery_timeout_s(self) -> float:
        """How long a receive may wait for a trigger whose visibility timeout has passed."""
        return 5 * self.visibility_s + 1.0 if self.real_time else 0.1

    async def before_visibility_expires(self) -> None:
        if not self.real_time:
            self.clock.advance(0.9 * self.visibility_s)

    async def after_visibility_expires(self) -> None:
        if not self.real_time:
            self.clock.advance(0.2 * self.visibility_s)

    async def long_after(self, seconds: float = 60) -> None:
        """Well past any visibility timeout."""
        self.clock.advance(seconds)
        if self.real_time:
            await asyncio.sleep(1.5 * self.visibility_s)


@asynccontextmanager
async def open_backend(name: str, clock: ManualClock) -> AsyncIterator[Backend]:
    """``memory``, ``redis`` (on a key prefix of its own, deleted afterwards) or ``postgres`` (on a
    database of its own, dropped afterwards)."""
    if name == "memory":
        memory = MemoryQueue(clock, visibility_timeout_s=10)
        try:
            yield Backend("memory", memory, clock, 10)
        finally:
            await memory.close()
        return
    if name == "postgres":
        async with postgres_queue_database() as database:
            queue = PostgresQueue(database, clock, visibility_timeout_s=POSTGRES_VISIBILITY_S)
            try:
                yield Backend("postgres", queue, clock, POSTGRES_VISIBILITY_S)
            finally:
                await queue.close()
        return
    url = require_redis()
    prefix = new_prefix()
    streams = RedisStreamQueue(url, clock, prefix=prefix, visibility_timeout_s=REDIS_VISIBILITY_S)
    try:
        yield Backend("redis", streams, clock, REDIS_VISIBILITY_S)
    finally:
        await streams.close()
        await delete_prefix(prefix)


class RedisQueues:
    """Makes ``RedisStreamQueue`` instances (think: processes) sharing one test's key prefix."""

    def __init__(self, clock: ManualClock) -> None:
        self.url = require_redis()
        self.prefix = new_prefix()
        self.clock = clock
        self.made: list[RedisStreamQueue] = []

    def __call__(self, **options: Any) -> RedisStreamQueue:
        options.setdefault("prefix", self.prefix)
        options.setdefault("visibility_timeout_s", REDIS_VISIBILITY_S)
        queue = RedisStreamQueue(self.url, self.clock, **options)
        self.made.append(queue)
        return queue

    async def aclose(self) -> None:
        for queue in self.made:
            await queue.close()
        await delete_prefix(self.prefix)

"""Choosing and opening backends from URLs (the one place that knows every technology).

| setting | embedded (default) | cluster |
|---|---|---|
| ``CRONWHEEL_DATABASE_URL`` | ``sqlite:///cronwheel.db`` | ``postgresql://user@host:5432/db`` |
| ``CRONWHEEL_COORDINATOR_URL`` | unset: this process owns every shard | ``etcd://host:2379[,host:2379...]`` |
| ``CRONWHEEL_QUEUE_URL`` | unset: in-process queue | ``redis://host:6379/0`` |

A backend that is down at start is waited for with exponential backoff, and the wait is logged:
a process never fires without its backends, and never crash-loops because one is late.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar
from urllib.parse import urlsplit

from cronwheel.clock import Clock
from cronwheel.coordinator import Coordinator
from cronwheel.coordinator.local import LocalCoordinator
from cronwheel.errors import InvalidInputError, PermanentError
from cronwheel.queue import Queue
from cronwheel.queue.memory import MemoryQueue
from cronwheel.store.sql import SqlStore, open_store

log = logging.getLogger("cronwheel.backends")

T = TypeVar("T")


async def with_backoff(name: str, connect: Callable[[], Awaitable[T]], *, max_delay_s: float = 30.0) -> T:
    """``connect()`` until it succeeds, waiting 0.5 s, 1 s, 2 s ... (capped) between tries.
    Errors that retrying cannot fix (bad URL, refused input) are raised at once."""
    delay = 0.5
    attempt = 1
    while True:
        try:
            return await connect()
        except (PermanentError, InvalidInputError):
            raise
        except Exception as error:  # any connection failure is worth another try
            log.warning(
                "backend unavailable, retrying",
                extra={
                    "action": "wait",
                    "backend": name,
                    "attempt": attempt,
                    "retry_in_s": delay,
                    "error": str(error),
                },
            )
        await asyncio.sleep(delay)
        delay = min(delay * 2, max_delay_s)
        attempt += 1


async def connect_store(url: str) -> SqlStore:
    return await with_backoff("database", lambda: open_store(url))


def is_postgres(url: str) -> bool:
    return urlsplit(url).scheme.startswith(("postgres", "postgresql"))


def etcd_endpoints(url: str) -> list[str]:
    """``etcd://h1:2379,h2:2379`` -> ``["http://h1:2379", "http://h2:2379"]``."""
    parts = urlsplit(url)
    if parts.scheme != "etcd" or not parts.netloc:
        raise InvalidInputError(f"coordinator URL must look like etcd://host:port[,host:port], not {url!r}")
    return [f"http://{host}" for host in parts.netloc.split(",") if host]


async def open_queue(url: str | None, clock: Clock, visibility_timeout_s: float) -> Queue:
    if not url:
        return MemoryQueue(clock, visibility_timeout_s=visibility_timeout_s)
    if urlsplit(url).scheme not in ("redis", "rediss"):
        raise InvalidInputError(f"queue URL must be redis://host:port[/db], not {url!r}")
    from cronwheel.queue.streams import RedisStreamQueue  # noqa: PLC0415 - cluster only

    queue = RedisStreamQueue(url, clock, visibility_timeout_s=visibility_timeout_s)
    await with_backoff("queue", queue.ping)
    return queue


async def open_coordinator(
    url: str | None, node: str, roles: tuple[str, ...], clock: Clock, ttl_s: float
) -> Coordinator:
    if not url:
        coordinator: Coordinator = LocalCoordinator(node, roles, clock)
    else:
        from cronwheel.coordinator.etcd import EtcdCoordinator  # noqa: PLC0415 - cluster only
        from cronwheel.coordinator.etcd_api import EtcdConfig  # noqa: PLC0415 - cluster only

        coordinator = EtcdCoordinator.connect(
            EtcdConfig(tuple(etcd_endpoints(url))), node, roles, clock, ttl_s=ttl_s
        )
    await with_backoff("coordinator", coordinator.start)
    return coordinator

"""Answers that many callers share for a few seconds: one computation per key at a time.

An expensive read that many viewers poll (the upcoming fires) is computed once per key and kept
for ``ttl`` seconds of the clock's monotonic time from the end of its computation; a caller
asking while it is computed awaits that computation (single flight) instead of starting its own.
A failed computation is not kept: its callers get its error and the next caller computes anew. A
caller that goes away (a request cancelled) does not cancel the computation the others await.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

from cronwheel.clock import Monotonic

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class SharedAnswers(Generic[K, V]):
    """Answers by key, each kept ``ttl`` seconds (at most ``size`` keys, the oldest dropped)."""

    def __init__(self, ticks: Monotonic, ttl: float, size: int = 256) -> None:
        self._ticks = ticks
        self._ttl = ttl
        self._size = size
        self._kept: dict[K, tuple[float, V]] = {}  # key -> (monotonic reading at its end, answer)
        self._running: dict[K, asyncio.Future[V]] = {}

    async def get(self, key: K, compute: Callable[[], Awaitable[V]]) -> V:
        """The answer kept for ``key`` if younger than ``ttl``, else the one being computed, else
        ``compute()``'s (kept for the next callers)."""
        kept = self._kept.get(key)
        if kept is not None and self._ticks.monotonic() - kept[0] < self._ttl:
            return kept[1]
        running = self._running.get(key)
        if running is None:
            running = asyncio.ensure_future(self._compute(key, compute))
            self._running[key] = running
            running.add_done_callback(lambda done: self._finished(key, done))
        return await asyncio.shield(running)

    async def _compute(self, key: K, compute: Callable[[], Awaitable[V]]) -> V:
        answer = await compute()
        self._kept.pop(key, None)  # re-inserted last: the dict's order is the answers' age
        # its age counts from its end: a count slower than the keeping time is still shared
        self._kept[key] = (self._ticks.monotonic(), answer)
        while len(self._kept) > self._size:
            del self._kept[next(iter(self._kept))]
        return answer

    def _finished(self, key: K, done: asyncio.Future[V]) -> None:
        if self._running.get(key) is done:
            del self._running[key]
        if not done.cancelled():
            done.exception()  # retrieved here too: an error whose every caller left is not logged as lost

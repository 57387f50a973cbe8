"""Keeping a cluster node's clock anchored to the store's clock.

Schedulers on different machines must agree on when a slot is due, and a wall-clock step on one
machine must not make it fire early (or stop firing). Every cluster node therefore runs on an
:class:`~cronwheel.clock.AnchoredClock` that this loop re-anchors on PostgreSQL's clock every few
seconds; between anchors it advances by the monotonic clock. A wall clock that strays from the
store's is reported (log ``action=clock``, gauge ``cronwheel_wall_clock_skew_seconds``) but no
longer matters to firing.
"""

from __future__ import annotations

import asyncio
import logging

from cronwheel.clock import AnchoredClock
from cronwheel.errors import TransientError
from cronwheel.retrying import LOOP, Backoff, pause
from cronwheel.store.port import ServerClock
from cronwheel.telemetry import metrics

log = logging.getLogger("cronwheel.clock")

ANCHOR_EVERY_S = 5.0
REPORT_SKEW_S = 0.5  # a wall clock further off than this is logged (it does not affect firing)


async def anchor_once(clock: AnchoredClock, store: ServerClock) -> float:
    """Read the store's clock a few times and re-anchor on the read with the shortest round trip
    (its midpoint is the most certain); returns the wall clock's skew in seconds."""
    samples = await store.server_time(clock.monotonic, samples=3)
    sent, reference, received = min(samples, key=lambda sample: sample[2] - sample[0])
    skew = clock.anchor(reference, sent, received)
    metrics.WALL_CLOCK_SKEW.set(skew)
    return skew


async def keep_anchored(
    clock: AnchoredClock,
    store: ServerClock,
    stop: asyncio.Event,
    node: str,
    every_s: float = ANCHOR_EVERY_S,
    backoff: Backoff = LOOP,
) -> None:
    """Re-anchor every ``every_s`` until ``stop``; a store that cannot be reached leaves the last
    anchor in force (the monotonic clock carries it) and is tried again as ``backoff`` says."""
    reported = 0.0
    tries = backoff.tracker()
    while not stop.is_set():
        wait = every_s
        try:
            skew = await anchor_once(clock, store)
        except TransientError as error:
            wait = tries.failed()
            extra = {"action": "wait", "node": node, "attempt": tries.failures, "error": str(error)}
            log.warning("store clock unavailable", extra={**extra, "retry_in_s": round(wait, 3)})
        else:
            tries.succeeded()
            if abs(skew - reported) > REPORT_SKEW_S / 2 and max(abs(skew), abs(reported)) > REPORT_SKEW_S:
                log.warning(
                    "wall clock differs from the store's clock; firing follows the store's",
                    extra={"action": "clock", "node": node, "skew_ms": round(skew * 1000)},
                )
                reported = skew
        await pause(wait, stop)

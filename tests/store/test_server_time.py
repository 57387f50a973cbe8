"""``Store.server_time``: the clock every cluster node anchors to."""

from __future__ import annotations

from datetime import UTC, datetime

from cronwheel.clock import AnchoredClock
from cronwheel.node.timekeeping import anchor_once
from cronwheel.store import Store

from .support import START


async def test_server_time_is_the_stores_clock(store: Store, backend: str) -> None:
    ticks = iter(range(1000))
    samples = await store.server_time(lambda: float(next(ticks)), samples=3)
    assert len(samples) == (3 if backend == "postgresql" else 1)
    for sent, _, received in samples:
        assert sent < received  # each read is bracketed by the caller's stamps
    first, second = samples[0][1], samples[-1][1]
    assert first.tzinfo == UTC
    assert second >= first
    if backend == "postgresql":  # the server's clock: the same machine here, so close to ours
        assert abs((first - datetime.now(UTC)).total_seconds()) < 5
    else:  # SQLite lives in the process: the store's injected clock answers
        assert first == START


async def test_an_anchored_clock_reads_the_stores_time(store: Store, backend: str) -> None:
    """On PostgreSQL here that is this machine's clock, so anchoring must not shift time. (A first
    version timed the pool checkout and pre-ping along with the read and ran 0.3 s behind: every
    slot fired that late.)"""
    clock = AnchoredClock()
    for _ in range(3):
        await anchor_once(clock, store)
        expected = datetime.now(UTC) if backend == "postgresql" else START
        assert abs((clock.now() - expected).total_seconds()) < 0.02

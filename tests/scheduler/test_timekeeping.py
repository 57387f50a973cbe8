"""Cluster nodes run on the store's clock: an anchored clock ignores wall-clock steps."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cronwheel.clock import AnchoredClock, ManualClock
from cronwheel.node.timekeeping import anchor_once, keep_anchored
from cronwheel.store.sql import open_store
from cronwheel.telemetry import metrics

FAR = datetime(2031, 6, 1, 12, 0, tzinfo=UTC)


def test_anchor_takes_the_midpoint_of_the_round_trip() -> None:
    clock = AnchoredClock()
    received = time.monotonic()
    clock.anchor(FAR, received - 0.4, received)  # read 0.2 s before ``received``, on average
    assert abs((clock.now() - (FAR + timedelta(seconds=0.2))).total_seconds()) < 0.05


def test_anchored_clock_advances_by_the_monotonic_clock() -> None:
    clock = AnchoredClock()
    now = time.monotonic()
    clock.anchor(FAR, now, now)
    first = clock.now()
    time.sleep(0.05)
    elapsed = (clock.now() - first).total_seconds()
    assert 0.05 <= elapsed < 0.5
    skew = clock.wall_skew_s()  # the machine's wall clock is years behind the reference
    assert skew < -86_400 * 365


async def test_anchor_once_follows_the_store_and_reports_the_skew(tmp_path: Path) -> None:
    reference = ManualClock(FAR)
    store = await open_store(f"sqlite:///{tmp_path / 'c.db'}", clock=reference)
    try:
        clock = AnchoredClock()
        skew = await anchor_once(clock, store)
        assert abs((clock.now() - FAR).total_seconds()) < 0.5
        assert abs(skew - (datetime.now(UTC) - FAR).total_seconds()) < 0.5
        assert metrics.REGISTRY.get_sample_value("cronwheel_wall_clock_skew_seconds") == skew
        reference.advance(3600)  # the store's clock moved: the next anchor follows it
        stop = asyncio.Event()
        task = asyncio.create_task(keep_anchored(clock, store, stop, "n1", every_s=0.01))
        await asyncio.sleep(0.1)
        stop.set()
        await task
        assert abs((clock.now() - (FAR + timedelta(hours=1))).total_seconds()) < 0.5
    finally:
        await store.close()


def test_a_small_step_back_holds_time_still_and_a_large_one_is_taken() -> None:
    clock = AnchoredClock()
    now = time.monotonic()
    clock.anchor(FAR, now, now)
    before = clock.now()
    clock.anchor(FAR - timedelta(seconds=0.1), now, now)  # 0.1 s back: never read time twice
    assert clock.now() >= before
    clock.anchor(FAR - timedelta(seconds=30), now, now)  # a real correction: followed
    assert clock.now() < before - timedelta(seconds=29)

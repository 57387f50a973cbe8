"""Answers shared for a few seconds (``api.answers``): one computation per key at a time (callers
asking meanwhile await it), kept for ``ttl`` seconds of the clock's monotonic time, per key; a
failure is not kept, and a caller that leaves does not cancel the others' computation."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from cronwheel.api.answers import SharedAnswers
from cronwheel.clock import ManualClock


class Counting:
    """A computation that counts its calls and, when gated, waits until released."""

    def __init__(self, gated: bool = False) -> None:
        self.calls = 0
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        if not gated:
            self.release.set()

    async def __call__(self) -> int:
        self.calls += 1
        self.started.set()
        await self.release.wait()
        return self.calls


def answers(ttl: float = 5.0, size: int = 256) -> tuple[SharedAnswers[str, int], ManualClock]:
    clock = ManualClock(datetime(2026, 3, 2, 12, tzinfo=UTC))
    return SharedAnswers(clock, ttl, size), clock


async def test_callers_asking_while_it_is_computed_share_one_computation() -> None:
    shared, _ = answers()
    compute = Counting(gated=True)
    first = asyncio.create_task(shared.get("hour", compute))
    await compute.started.wait()
    others = [asyncio.create_task(shared.get("hour", compute)) for _ in range(3)]
    compute.release.set()
    assert await asyncio.gather(first, *others) == [1, 1, 1, 1]
    assert compute.calls == 1


async def test_an_answer_is_kept_for_its_ttl_per_key() -> None:
    shared, clock = answers(ttl=5.0)
    compute = Counting()
    assert await shared.get("hour", compute) == 1
    clock.advance(4.9)
    assert await shared.get("hour", compute) == 1  # kept
    assert await shared.get("day", compute) == 2  # another key: its own count
    clock.advance(0.1)
    assert await shared.get("hour", compute) == 3  # five seconds old: counted anew
    assert compute.calls == 3


async def test_a_wall_clock_step_does_not_age_an_answer() -> None:
    shared, clock = answers(ttl=5.0)
    compute = Counting()
    await shared.get("hour", compute)
    clock.set(datetime(2026, 3, 3, tzinfo=UTC))  # a step of the wall clock, no time elapsed
    assert await shared.get("hour", compute) == 1


async def test_the_oldest_keys_are_dropped_beyond_the_size() -> None:
    shared, _ = answers(size=2)
    compute = Counting()
    for key in ("a", "b", "c"):
        await shared.get(key, compute)
    assert await shared.get("c", compute) == 3
    assert await shared.get("a", compute) == 4  # dropped: counted anew


async def test_a_failure_is_not_kept() -> None:
    shared, _ = answers()
    calls = 0

    async def failing() -> int:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("store unavailable")
        return calls

    with pytest.raises(RuntimeError, match="store unavailable"):
        await shared.get("hour", failing)
    assert await shared.get("hour", failing) == 2


async def test_a_caller_that_leaves_does_not_cancel_the_others_computation() -> None:
    shared, _ = answers()
    compute = Counting(gated=True)
    leaving = asyncio.create_task(shared.get("hour", compute))
    await compute.started.wait()
    staying = asyncio.create_task(shared.get("hour", compute))
    leaving.cancel()
    compute.release.set()
    assert await staying == 1
    assert leaving.cancelled()
    assert compute.calls == 1

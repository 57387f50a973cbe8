"""The monotonic readings of the clocks (``cronwheel.clock``), which the coordinator measures its
local deadline on. (Beside the coordinator's tests because they were added for it; they belong
with ``tests/test_clock.py``.)"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from cronwheel.clock import AnchoredClock, ManualClock, Monotonic, SystemClock, monotonic_of


def test_manual_monotonic_time_moves_with_advance_and_not_with_a_wall_clock_step() -> None:
    clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC), monotonic=100.0)
    assert clock.monotonic() == 100.0
    clock.advance(2.5)
    assert clock.monotonic() == 102.5
    clock.set(datetime(2020, 1, 1, tzinfo=UTC))  # a step back of the wall clock
    assert clock.monotonic() == 102.5
    clock.advance(-60)  # also a step: the instant moves, elapsed time does not
    assert clock.now() == datetime(2020, 1, 1, tzinfo=UTC) - timedelta(seconds=60)
    assert clock.monotonic() == 102.5


def test_every_clock_has_a_monotonic_reading_and_other_clocks_get_the_machines() -> None:
    for clock in (SystemClock(), AnchoredClock(), ManualClock(datetime(2026, 1, 1, tzinfo=UTC))):
        assert isinstance(clock, Monotonic)
        assert monotonic_of(clock) is clock

    class WallOnly:
        def now(self) -> datetime:
            return datetime(2026, 1, 1, tzinfo=UTC)

    fallback = monotonic_of(WallOnly())
    first = fallback.monotonic()
    assert fallback.monotonic() >= first
    assert isinstance(fallback, SystemClock)

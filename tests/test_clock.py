"""The clock module: the only place that reads the time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from cronwheel.clock import ManualClock, SystemClock


def test_system_clock_is_aware_utc() -> None:
    now = SystemClock().now()
    assert now.tzinfo is UTC
    assert abs(now - datetime.now(UTC)) < timedelta(seconds=5)


def test_manual_clock_moves_only_when_told() -> None:
    start = datetime(2026, 1, 1, 1, tzinfo=timezone(timedelta(hours=1)))
    clock = ManualClock(start)
    assert clock.now() == datetime(2026, 1, 1, tzinfo=UTC)
    assert clock.now().tzinfo is UTC
    clock.advance(90)
    assert clock.now() == datetime(2026, 1, 1, 0, 1, 30, tzinfo=UTC)
    clock.set(datetime(2027, 1, 1, tzinfo=UTC))
    assert clock.now().year == 2027


def test_manual_clock_refuses_naive_instants() -> None:
    with pytest.raises(ValueError, match="aware"):
        ManualClock(datetime(2026, 1, 1))  # noqa: DTZ001
    with pytest.raises(ValueError, match="aware"):
        ManualClock(datetime(2026, 1, 1, tzinfo=UTC)).set(datetime(2026, 1, 2))  # noqa: DTZ001

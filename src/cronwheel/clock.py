"""The one module that reads the clock.

Everything else receives ``now`` or a :class:`Clock`, so that tests drive time with a
:class:`ManualClock` instead of sleeping.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    """A source of the current instant (aware, UTC)."""

    def now(self) -> datetime: ...


class SystemClock:
    """The machine's wall clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)


class ManualClock:
    """A clock that moves only when told to (for tests and simulations)."""

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("ManualClock needs an aware start instant")
        self._now = start.astimezone(UTC)

    def now(self) -> datetime:
        return self._now

    def advance(self, seconds: float) -> datetime:
        self._now += timedelta(seconds=seconds)
        return self._now

    def set(self, instant: datetime) -> datetime:
        if instant.tzinfo is None:
            raise ValueError("ManualClock needs an aware instant")
        self._now = instant.astimezone(UTC)
        return self._now

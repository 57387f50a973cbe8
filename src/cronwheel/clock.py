"""The one module that reads the clock.

Everything else receives ``now`` or a :class:`Clock`, so that tests drive time with a
:class:`ManualClock` instead of sleeping. Two kinds of time: ``now()``, the instant (aware, UTC),
for everything that is stored or compared with a schedule; and ``monotonic()`` (:class:`Monotonic`),
seconds that never step, for deadlines measured on this machine (a lease's local deadline, a
timeout). Every clock here has both.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable


class Clock(Protocol):
    """A source of the current instant (aware, UTC)."""

    def now(self) -> datetime: ...


@runtime_checkable
class Monotonic(Protocol):
    """Seconds that only move forward, at the rate of real time (``time.monotonic()``): the
    difference of two readings is elapsed time, whatever the wall clock did meanwhile."""

    def monotonic(self) -> float: ...


def monotonic_of(clock: object) -> Monotonic:
    """``clock`` itself when it has a monotonic reading (every clock of this module does), else
    this machine's: code that takes a :class:`Clock` gets the monotonic time that goes with it,
    and a test that passes a :class:`ManualClock` moves both with ``advance()``."""
    return clock if isinstance(clock, Monotonic) else SystemClock()


class SystemClock:
    """The machine's wall clock (and its monotonic clock)."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()


class AnchoredClock:
    """A reference clock carried forward by this machine's monotonic clock.

    Cluster nodes anchor to the store's clock (:meth:`anchor`, every few seconds), so every node
    agrees on "now" whatever its wall clock says, and a wall-clock step (NTP, an operator, a VM
    resumed from a snapshot) cannot make a slot fire early or late: between anchors, time advances
    by ``time.monotonic()``, which never steps. Until the first anchor it reads the wall clock.
    """

    HOLD_AT_MOST = timedelta(seconds=0.5)  # a smaller step back is absorbed by holding time still

    def __init__(self) -> None:
        self._base = datetime.now(UTC)
        self._base_mono = time.monotonic()
        self._latest = self._base

    def now(self) -> datetime:
        """Never earlier than an instant it already returned: a re-anchor that moves the base a
        little back holds time still until it catches up, so nothing is stamped or fired twice."""
        current = self._base + timedelta(seconds=time.monotonic() - self._base_mono)
        self._latest = max(self._latest, current)
        return self._latest

    def monotonic(self) -> float:
        return time.monotonic()

    def anchor(self, reference: datetime, sent_mono: float, received_mono: float) -> float:
        """Re-anchor on ``reference``, read by the store between ``sent_mono`` and
        ``received_mono`` (assumed read at the midpoint). Returns how far this machine's wall clock
        is ahead of the reference, in seconds (negative: behind)."""
        midpoint = (sent_mono + received_mono) / 2
        self._base = reference.astimezone(UTC) + timedelta(seconds=received_mono - midpoint)
        self._base_mono = received_mono
        current = self._base + timedelta(seconds=time.monotonic() - self._base_mono)
        if current < self._latest - self.HOLD_AT_MOST:  # a real step (first anchor): take it
            self._latest = current
        return self.wall_skew_s()

    def wall_skew_s(self) -> float:
        return (datetime.now(UTC) - self.now()).total_seconds()


class ManualClock:
    """A clock that moves only when told to (for tests and simulations).

    ``advance()`` moves both readings, as real time passing would; ``set()`` (or a negative
    ``advance()``) moves only the instant, as a wall-clock step (NTP, an operator) would, and
    leaves :meth:`monotonic` alone."""

    def __init__(self, start: datetime, monotonic: float = 0.0) -> None:
        if start.tzinfo is None:
            raise ValueError("ManualClock needs an aware start instant")
        self._now = start.astimezone(UTC)
        self._monotonic = monotonic

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return self._monotonic

    def advance(self, seconds: float) -> datetime:
        self._now += timedelta(seconds=seconds)
        self._monotonic += max(seconds, 0.0)  # going back is a step of the wall clock only
        return self._now

    def set(self, instant: datetime) -> datetime:
        if instant.tzinfo is None:
            raise ValueError("ManualClock needs an aware instant")
        self._now = instant.astimezone(UTC)
        return self._now

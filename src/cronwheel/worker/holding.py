"""Triggers received ahead of their slot, held by the worker until it.

A scheduler releases armed runs a little before their slot (``Scheduler(release_ahead_s=...)``),
each trigger carrying its slot. The worker holds such a trigger here, without taking one of its
attempt slots, and hands it to the claim at the slot; the claim (which refuses a run before its
slot) is the check that the run still stands. Held triggers are not acknowledged: a worker that
dies holding them leaves them pending in the queue, handed to another worker after the visibility
timeout (or to its next life at once), and the store-side sweep queues them again meanwhile.

:class:`Holding` is the pure part (the caller says what time it is); the worker's timer loop
sleeps until :meth:`Holding.next_at` by its clock and takes :meth:`Holding.pop_due`.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence
from datetime import datetime

from cronwheel.queue import Delivery

HOLD_MOST = 10_000  # triggers a worker holds at most (a few hundred bytes each)


class Holding:
    """Deliveries waiting for their slot, earliest first, at most ``most`` of them."""

    def __init__(self, most: int = HOLD_MOST) -> None:
        self.most = most
        self._heap: list[tuple[datetime, int, Delivery]] = []
        self._order = itertools.count()

    def __len__(self) -> int:
        return len(self._heap)

    def room(self) -> int:
        """How many more may be held."""
        return max(0, self.most - len(self._heap))

    def hold_early(self, deliveries: Sequence[Delivery], now: datetime) -> list[Delivery]:
        """Hold those whose slot is after ``now``; return the others (due: to claim now)."""
        due: list[Delivery] = []
        for delivery in deliveries:
            slot = delivery.trigger.slot
            if slot is None or slot <= now:
                due.append(delivery)
            else:
                heapq.heappush(self._heap, (slot, next(self._order), delivery))
        return due

    def next_at(self) -> datetime | None:
        """The earliest slot held (None: nothing is held)."""
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now: datetime) -> list[Delivery]:
        """Take out the deliveries whose slot is ``now`` or before, earliest first."""
        due: list[Delivery] = []
        while self._heap and self._heap[0][0] <= now:
            due.append(heapq.heappop(self._heap)[2])
        return due

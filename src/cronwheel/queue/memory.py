"""``MemoryQueue``: the embedded trigger queue, in-process.

Same contract as the Redis Streams queue: at-least-once hand-out with a visibility timeout,
delayed triggers, ack. It holds nothing durable, which is fine: the store is the record, and the
store-side sweep re-queues what a restart lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from cronwheel.clock import Clock
from cronwheel.queue.port import Delivery, QueueStats, Trigger


@dataclass
class _Lane:
    ready: deque[tuple[Trigger, int]] = field(default_factory=deque)  # (trigger, times handed out)
    since: dict[str, float] = field(default_factory=dict)  # run id -> when first made ready
    delayed: list[tuple[float, int, Trigger]] = field(default_factory=list)  # heap by due time
    inflight: dict[str, tuple[Trigger, int, float]] = field(default_factory=dict)  # token -> ..., deadline
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)


class MemoryQueue:
    """In-process queue, one lane per queue name."""

    def __init__(self, clock: Clock, visibility_timeout_s: float = 300.0) -> None:
        self._clock = clock
        self._visibility = visibility_timeout_s
        self._lanes: dict[str, _Lane] = {}
        self._tokens = itertools.count(1)
        self._seq = itertools.count()

    def _lane(self, queue: str) -> _Lane:
        lane = self._lanes.get(queue)
        if lane is None:
            lane = self._lanes[queue] = _Lane()
        return lane

    async def publish(self, triggers: Sequence[Trigger]) -> None:
        now = self._clock.now().timestamp()
        for trigger in triggers:
            lane = self._lane(trigger.queue)
            lane.ready.append((trigger, 0))
            lane.since.setdefault(trigger.run_id, now)
            lane.wakeup.set()

    async def publish_at(self, trigger: Trigger, at: datetime) -> None:
        lane = self._lane(trigger.queue)
        heapq.heappush(lane.delayed, (at.timestamp(), next(self._seq), trigger))
        lane.wakeup.set()

    async def receive(self, queue: str, consumer: str, limit: int, timeout_s: float) -> list[Delivery]:
        lane = self._lane(queue)
        loop = asyncio.get_running_loop()
        give_up = loop.time() + timeout_s
        while True:
            self._promote(lane)
            if lane.ready:
                return self._hand_out(lane, limit)
            wait = give_up - loop.time()
            if wait <= 0:
                return []
            lane.wakeup.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(lane.wakeup.wait(), min(wait, self._next_due_in(lane)))

    def _promote(self, lane: _Lane) -> None:
        """Move due delayed triggers and expired in-flight ones to the ready deque."""
        now = self._clock.now().timestamp()
        while lane.delayed and lane.delayed[0][0] <= now:
            _, _, trigger = heapq.heappop(lane.delayed)
            lane.ready.append((trigger, 0))
            lane.since.setdefault(trigger.run_id, now)
        for token, (trigger, count, deadline) in list(lane.inflight.items()):
            if deadline <= now:
                del lane.inflight[token]
                lane.ready.append((trigger, count))

    def _next_due_in(self, lane: _Lane) -> float:
        now = self._clock.now().timestamp()
        times = [t for t, _, _ in lane.delayed[:1]] + [d for _, _, d in lane.inflight.values()]
        return max(0.01, min(times) - now) if times else 3600.0

    def _hand_out(self, lane: _Lane, limit: int) -> list[Delivery]:
        deadline = self._clock.now().timestamp() + self._visibility
        out: list[Delivery] = []
        while lane.ready and len(out) < limit:
            trigger, count = lane.ready.popleft()
            token = str(next(self._tokens))
            lane.inflight[token] = (trigger, count + 1, deadline)
            out.append(Delivery(trigger, token, count + 1))
        return out

    async def ack(self, queue: str, deliveries: Sequence[Delivery]) -> None:
        lane = self._lane(queue)
        for delivery in deliveries:
            lane.inflight.pop(delivery.token, None)
            lane.since.pop(delivery.trigger.run_id, None)

    async def depth(self, queue: str) -> int:
        lane = self._lane(queue)
        return len(lane.ready) + len(lane.delayed)

    async def lag(self, queue: str) -> float:
        lane = self._lane(queue)
        if not lane.since:
            return 0.0
        return max(0.0, self._clock.now().timestamp() - min(lane.since.values()))

    async def stats(self, queue: str) -> QueueStats:
        lane = self._lane(queue)
        self._promote(lane)  # what is due is ready, as a receive would see it
        return QueueStats(len(lane.ready), len(lane.inflight), len(lane.delayed), await self.lag(queue))

    async def close(self) -> None:
        self._lanes.clear()

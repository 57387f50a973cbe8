"""Test doubles shared by the API and CLI tests."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from cronwheel.queue import Delivery, QueueStats, Trigger


class RecordingQueue:
    """Remembers what was published; delivers nothing."""

    def __init__(self) -> None:
        self.published: list[Trigger] = []

    async def publish(self, triggers: Sequence[Trigger]) -> None:
        self.published.extend(triggers)

    async def publish_at(self, trigger: Trigger, at: datetime) -> None:
        self.published.append(trigger)

    async def receive(self, queue: str, consumer: str, limit: int, timeout_s: float) -> list[Delivery]:
        return []

    async def ack(self, queue: str, deliveries: Sequence[Delivery]) -> None:
        return None

    async def depth(self, queue: str) -> int:
        return len(self.published)

    async def lag(self, queue: str) -> float:
        return 0.0

    async def stats(self, queue: str) -> QueueStats:
        return QueueStats(len(self.published), 0, 0, 0.0)

    async def close(self) -> None:
        return None

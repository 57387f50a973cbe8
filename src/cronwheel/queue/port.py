"""The ``Queue`` protocol."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Trigger:
    run_id: str
    job_id: str
    queue: str = "default"
    # released ahead: when the run is due (its slot, or its jittered fire time); held until then
    slot: datetime | None = None


@dataclass(frozen=True, slots=True)
class Delivery:
    trigger: Trigger
    token: str  # backend handle for ack
    deliveries: int = 1  # how many times this trigger was handed out


@dataclass(frozen=True, slots=True)
class QueueStats:
    """One queue's figures at one moment (``Queue.stats``): what the metrics export."""

    ready: int  # due and waiting to be handed out
    pending: int  # handed out, not yet acknowledged
    delayed: int  # held until a later due time (retries)
    lag_s: float  # as ``Queue.lag``


class Queue(Protocol):
    """Contract (``tests/queue/test_queue_contract.py``, on every backend):

    * ``publish`` makes each trigger available to exactly one ``receive`` at a time on its queue
      name, with its ``slot`` (if any) as published; ``publish_at`` holds it until the given
      instant.
    * A received trigger that is not ``ack``-ed within the visibility timeout is handed out again
      (at-least-once); ``ack`` removes it for good.
    * ``receive`` waits at most ``timeout_s`` and returns up to ``limit`` deliveries.
    * ``stats`` counts what is ready, pending (handed out, not acknowledged) and delayed, with the
      lag, in one cheap read (a scrape of ``/metrics`` calls it).
    """

    async def publish(self, triggers: Sequence[Trigger]) -> None: ...
    async def publish_at(self, trigger: Trigger, at: datetime) -> None: ...
    async def receive(self, queue: str, consumer: str, limit: int, timeout_s: float) -> list[Delivery]: ...
    async def ack(self, queue: str, deliveries: Sequence[Delivery]) -> None: ...
    async def depth(self, queue: str) -> int: ...
    async def lag(self, queue: str) -> float:
        """Age in seconds of the oldest trigger not yet acknowledged (0 when empty)."""
        ...

    async def stats(self, queue: str) -> QueueStats: ...
    async def close(self) -> None: ...

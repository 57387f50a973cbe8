"""The trigger queue port: tells workers which run to attempt next.

Messages are thin (a run id, its job id and queue name): no payloads, no secrets. The queue is
never the record: a trigger lost here is found again by the store-side sweep.
Backends: :class:`cronwheel.queue.memory.MemoryQueue` (embedded, in-process),
:class:`cronwheel.queue.streams.RedisStreamQueue` (Redis Streams) and
:class:`cronwheel.queue.postgres.PostgresQueue` (a table in the store's PostgreSQL database).
"""

from cronwheel.queue.port import Delivery, Queue, QueueStats, Trigger

__all__ = ["Delivery", "Queue", "QueueStats", "Trigger"]

"""The ``Coordinator`` protocol."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Member:
    node: str
    roles: tuple[str, ...]  # "api", "scheduler", "worker"
    since: datetime | None = None
    last_heartbeat: datetime | None = None
    metrics_url: str | None = None  # where the node serves /metrics (None: it did not say)


@dataclass(frozen=True, slots=True)
class ShardLease:
    shard: int
    epoch: int  # fencing token: strictly greater every time the shard changes hands
    valid_until: float  # monotonic deadline (the clock's monotonic()) after which this node must not fire it


class Coordinator(Protocol):
    """Contract (``tests/coordinator/test_contract.py``, on every backend):

    * ``start`` registers this node (``node``, ``roles`` and, when given, ``metrics_url``) with a
      lease of ``ttl_s``; it stays a member while it heartbeats, and disappears within the TTL
      after it stops (crash, pause, partition). ``members()`` lists live members as registered.
    * At most one member is the leader at a time (``leader()``); when it disappears another
      scheduler member takes over within the TTL.
    * At most one member holds the watchdog duty at a time (``watchdog()``): every member
      campaigns for it, whatever its roles, so it outlives the schedulers (the notifier, and
      with it the dead-man's switch, runs where it is held). When its holder disappears another
      member takes it within the TTL; a holder whose check (``set_watchdog_check``) says it
      cannot do the duty gives it up, and campaigns again once it can.
    * The leader assigns the fixed set of shards (``cronwheel.model.SHARDS``) to live scheduler
      members by rendezvous hashing, so a member joining or leaving moves only its share.
    * ``owned_shards()`` returns this node's shard leases that are valid *now*. Each lease's
      ``epoch`` is the fencing token the store checks on every firing write; a node that cannot
      renew stops returning a shard before the lease can expire at the coordinator (its local
      deadline is renewal time + TTL minus a safety margin), so two nodes never both believe they
      own a shard for longer than clock drift allows — and the store's epoch check makes even that
      harmless.
    * ``wait_for_change(timeout_s)`` returns when ownership or membership may have changed (or
      after the timeout), so schedulers reload promptly after a rebalance.
    * A coordinator that meets an error retrying cannot fix (refused credentials, a bug) stops
      renewing, and its calls raise a :class:`~cronwheel.errors.PermanentError` from then on, so
      that the process stops (the supervision rule) rather than run without a coordinator.
    """

    node: str

    async def start(self) -> None: ...
    async def stop(self) -> None: ...
    def owned_shards(self) -> dict[int, ShardLease]: ...
    async def members(self) -> list[Member]: ...
    async def leader(self) -> str | None: ...
    async def watchdog(self) -> str | None: ...
    async def wait_for_change(self, timeout_s: float) -> None: ...
    def set_health_check(self, healthy: Callable[[], bool]) -> None:
        """Stay a member only while ``healthy()``: an unhealthy node stops heartbeating, so its
        shards move to others within the TTL; it joins again once healthy (no-op on one node)."""
        ...

    def set_watchdog_check(self, able: Callable[[], bool]) -> None:
        """Hold (and campaign for) the watchdog duty only while ``able()`` (no-op on one node)."""
        ...

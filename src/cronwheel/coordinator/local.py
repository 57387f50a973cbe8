"""``LocalCoordinator``: the embedded coordinator. One process, leader of itself, holder of the
watchdog duty, owner of every shard with epoch 1, forever."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime

from cronwheel.clock import Clock
from cronwheel.coordinator.port import Member, ShardLease
from cronwheel.model import SHARDS
from cronwheel.telemetry import metrics


class LocalCoordinator:
    def __init__(
        self,
        node: str,
        roles: tuple[str, ...],
        clock: Clock,
        shards: int = SHARDS,
        *,
        metrics_url: str | None = None,
    ) -> None:
        self.node = node
        self.roles = roles
        self.metrics_url = metrics_url
        self._clock = clock
        self._since: datetime | None = None
        self._leases = {shard: ShardLease(shard, 1, float("inf")) for shard in range(shards)}

    async def start(self) -> None:
        self._since = self._clock.now()
        metrics.LEADER_ELECTIONS.inc()  # leader of itself from now on

    async def stop(self) -> None:
        self._leases = {}

    def owned_shards(self) -> dict[int, ShardLease]:
        return dict(self._leases)

    async def members(self) -> list[Member]:
        now = self._clock.now()
        return [Member(self.node, self.roles, self._since, now, self.metrics_url)]

    async def leader(self) -> str | None:
        return self.node

    async def watchdog(self) -> str | None:
        return self.node

    async def wait_for_change(self, timeout_s: float) -> None:
        await asyncio.sleep(timeout_s)

    def set_health_check(self, healthy: Callable[[], bool]) -> None:
        """One process owns everything: there is nobody to hand shards to."""

    def set_watchdog_check(self, able: Callable[[], bool]) -> None:
        """One process: the duty is its own, able or not (there is nobody else to watch)."""

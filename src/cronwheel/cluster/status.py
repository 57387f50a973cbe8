"""Cluster status: who is alive, who leads, who holds the watchdog duty (the notifier: the
dead-man's switch and notification delivery), who owns which shard, how deep the queues are, and
where each node serves its metrics.

Served at ``GET /v1/cluster`` and printed by ``cronwheel cluster status``, with the mode the
cluster runs in (:mod:`cronwheel.cluster.mode`: PostgreSQL alone, or with etcd and Redis).

Where a node's metrics are is part of its coordinator member record (``Member.metrics_url``),
which every coordinator backend keeps beside the node's roles.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cronwheel.clock import Clock, SystemClock
from cronwheel.cluster.mode import Mode
from cronwheel.coordinator import Coordinator
from cronwheel.coordinator.port import Member
from cronwheel.lateness import LATENESS_SAMPLE, LATENESS_WINDOW, percentiles
from cronwheel.model import SHARDS, RunState
from cronwheel.queue import Queue
from cronwheel.store.port import ClusterReads


@dataclass(frozen=True, slots=True)
class ClusterStatus:
    store: ClusterReads
    queue: Queue
    coordinator: Coordinator
    queues: tuple[str, ...]
    mode: Mode
    clock: Clock = field(default_factory=SystemClock)

    async def snapshot(self) -> dict[str, Any]:
        members = await self.coordinator.members()
        owners = await self.store.shard_owners()
        counts = await self.store.count_runs((RunState.PENDING, RunState.RUNNING, RunState.RETRYING))
        queues = []
        for name in self.queues:
            queues.append(
                {"name": name, "depth": await self.queue.depth(name), "lag_s": await self.queue.lag(name)}
            )
        return {
            "mode": self.mode.as_dict(),
            "leader": await self.coordinator.leader(),
            "watchdog": await self.coordinator.watchdog(),
            "nodes": [_node(member) for member in members],
            "shard_count": SHARDS,  # those without a row in "shards" no node has claimed
            "shards": [
                {"shard": shard, "node": node, "epoch": epoch}
                for shard, (node, epoch) in sorted(owners.items())
            ],
            "queues": queues,
            "runs": {
                state.value: counts.get(state, 0)
                for state in (RunState.PENDING, RunState.RUNNING, RunState.RETRYING)
            },
            "fire_lateness": await self._fire_lateness(),
        }

    async def _fire_lateness(self) -> dict[str, Any]:
        """Percentiles of queued_at - slot over the scheduled runs of the last
        :data:`~cronwheel.lateness.LATENESS_WINDOW` (at most the newest
        :data:`~cronwheel.lateness.LATENESS_SAMPLE`: one bounded read of the slot index)."""
        since = self.clock.now() - LATENESS_WINDOW
        values = await self.store.fire_lateness(since, LATENESS_SAMPLE)
        window = int(LATENESS_WINDOW.total_seconds())
        return {"window_s": window, "sample_limit": LATENESS_SAMPLE, **percentiles(values)}


def _node(member: Member) -> dict[str, Any]:
    return {
        "node": member.node,
        "roles": list(member.roles),
        "metrics_url": member.metrics_url,
        "since": member.since.isoformat() if member.since else None,
        "last_heartbeat": member.last_heartbeat.isoformat() if member.last_heartbeat else None,
    }

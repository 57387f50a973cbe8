"""Cluster status: who is alive, who leads, who owns which shard, how deep the queues are.

Served at ``GET /v1/cluster`` and printed by ``cronwheel cluster status``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cronwheel.coordinator import Coordinator
from cronwheel.model import RunState
from cronwheel.queue import Queue
from cronwheel.store.sql import SqlStore


@dataclass(frozen=True, slots=True)
class ClusterStatus:
    store: SqlStore
    queue: Queue
    coordinator: Coordinator
    queues: tuple[str, ...]

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
            "leader": await self.coordinator.leader(),
            "nodes": [
                {
                    "node": m.node,
                    "roles": list(m.roles),
                    "since": m.since.isoformat() if m.since else None,
                    "last_heartbeat": m.last_heartbeat.isoformat() if m.last_heartbeat else None,
                }
                for m in members
            ],
            "shards": [
                {"shard": shard, "node": node, "epoch": epoch}
                for shard, (node, epoch) in sorted(owners.items())
            ],
            "queues": queues,
            "runs": {
                state.value: counts.get(state, 0)
                for state in (RunState.PENDING, RunState.RUNNING, RunState.RETRYING)
            },
        }

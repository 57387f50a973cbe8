"""Cluster status: who is alive, who leads, who owns which shard, how deep the queues are, and
where each node serves its metrics.

Served at ``GET /v1/cluster`` and printed by ``cronwheel cluster status``.

Where a node's metrics are is part of its member record, which every coordinator keeps: a node
registers its roles followed by ``metrics=<url>`` (:func:`advertised_roles`), and
:func:`read_roles` takes the two apart again. Carried in the roles list, the address needs no
field of its own in any coordinator backend, and one that ignores it (an older node) is shown
without an address.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cronwheel.coordinator import Coordinator
from cronwheel.coordinator.port import Member
from cronwheel.model import RunState
from cronwheel.queue import Queue
from cronwheel.store.sql import SqlStore

METRICS = "metrics="


def advertised_roles(roles: tuple[str, ...], metrics_url: str | None) -> tuple[str, ...]:
    """What a node registers as its roles: the roles, then where its metrics are."""
    return roles if metrics_url is None else (*roles, f"{METRICS}{metrics_url}")


def read_roles(member: Member) -> tuple[tuple[str, ...], str | None]:
    """A member's roles and its metrics URL (None: not advertised)."""
    roles = tuple(role for role in member.roles if not role.startswith(METRICS))
    urls = [role.removeprefix(METRICS) for role in member.roles if role.startswith(METRICS)]
    return roles, urls[0] if urls else None


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
            "nodes": [_node(member) for member in members],
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


def _node(member: Member) -> dict[str, Any]:
    roles, metrics_url = read_roles(member)
    return {
        "node": member.node,
        "roles": list(roles),
        "metrics_url": metrics_url,
        "since": member.since.isoformat() if member.since else None,
        "last_heartbeat": member.last_heartbeat.isoformat() if member.last_heartbeat else None,
    }

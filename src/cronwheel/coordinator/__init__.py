"""The coordinator port: membership, leadership and shard ownership with fencing.

Backends: :class:`cronwheel.coordinator.local.LocalCoordinator` (embedded: this process is the only
member, the leader, and owns every shard), the etcd coordinator and the PostgreSQL coordinator
(cluster: :mod:`cronwheel.coordinator.etcd`, :mod:`cronwheel.coordinator.postgres`).
"""

from cronwheel.coordinator.port import Coordinator, Member, ShardLease

__all__ = ["Coordinator", "Member", "ShardLease"]

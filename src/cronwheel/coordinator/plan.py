"""The decisions of the etcd coordinator, as pure functions of what it has seen.

:func:`decide` takes one node's view of the coordinator's keys (members, leader, assignment,
shard keys: the watch keeps it current) and the shards the node holds, and says what to do next:
campaign for leadership, campaign for (or give up) the watchdog duty, publish a new assignment,
acquire, release, adopt or forget shards.

Two duties are elected, each by a key created only if absent on the holder's lease: ``leader``
(scheduler members only: it assigns the shards, and runs the sweep and the retention purge) and
``watchdog`` (every member, whatever its roles: it runs the notifier, so that the dead-man's
switch keeps watching when every scheduler is gone).
:class:`cronwheel.coordinator.etcd.EtcdCoordinator` carries the plan out with conditional
transactions, so a plan made from a stale view fails harmlessly and is made again when the
view catches up.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

SCHEDULER = "scheduler"
LEADER, WATCHDOG = "leader", "watchdog"  # the elected duties: their etcd keys


def rendezvous_score(shard: int, node: str) -> int:
    """A stable pseudo-random weight of (shard, node), the same in every process and release."""
    digest = hashlib.blake2b(f"{shard}/{node}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def rendezvous(shards: int, nodes: Iterable[str]) -> tuple[str | None, ...]:
    """Owner of every shard by rendezvous (highest random weight) hashing: each shard goes to the
    node with the highest score for it, so adding or removing a node moves only the shards that
    node wins or held (about ``1/len(nodes)`` of them)."""
    candidates = sorted(set(nodes))
    if not candidates:
        return (None,) * shards
    return tuple(
        max(candidates, key=lambda node: (rendezvous_score(shard, node), node)) for shard in range(shards)
    )


@dataclass(frozen=True, slots=True)
class ShardKey:
    """The etcd key of one held shard: who holds it, under which lease, since which revision."""

    node: str
    lease: int
    epoch: int  # the key's create revision


@dataclass(frozen=True, slots=True)
class View:
    """What one node knows of the coordinator's keys, as of ``revision``."""

    revision: int
    members: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # node -> roles
    leader: str | None = None
    leader_lease: int = 0
    watchdog: str | None = None  # the holder of the watchdog duty (the notifier)
    watchdog_lease: int = 0
    assignment: tuple[str | None, ...] | None = None
    assignment_revision: int = 0  # mod revision of the assignment key, 0 when absent
    shards: Mapping[int, ShardKey] = field(default_factory=dict)

    def holder(self, duty: str) -> tuple[str | None, int]:
        """Who holds ``duty`` (``leader`` or ``watchdog``), and on which lease (0: nobody)."""
        if duty == LEADER:
            return self.leader, self.leader_lease
        return self.watchdog, self.watchdog_lease

    def schedulers(self) -> list[str]:
        return sorted(node for node, roles in self.members.items() if SCHEDULER in roles)


@dataclass(frozen=True, slots=True)
class Plan:
    campaign: bool = False  # try to become the leader
    watch: bool = False  # try to take the watchdog duty
    resign: bool = False  # give the watchdog duty up (this node cannot do it now)
    assignment: tuple[str | None, ...] | None = None  # publish this assignment (leader only)
    acquire: tuple[int, ...] = ()  # create these shard keys
    release: Mapping[int, int] = field(default_factory=dict)  # shard -> epoch: forget, then delete
    adopt: Mapping[int, int] = field(default_factory=dict)  # shard -> epoch: ours in etcd, not held
    drop: tuple[int, ...] = ()  # held, but the key is gone or no longer ours: forget

    def __bool__(self) -> bool:
        return bool(
            self.campaign
            or self.watch
            or self.resign
            or self.assignment
            or self.acquire
            or self.release
            or self.adopt
            or self.drop
        )


def decide(
    node: str,
    roles: tuple[str, ...],
    lease: int,
    view: View,
    held: Mapping[int, int],
    shards: int,
    *,
    may_watch: bool = True,
) -> Plan:
    """What ``node`` (holding ``lease`` and the shards ``held``: shard -> epoch) should do next.
    ``may_watch``: whether it can do the watchdog duty now (its notifier reaches the store): a
    member that can campaigns for it while nobody holds it, and a holder that cannot gives it up."""
    if not lease:
        return Plan(drop=tuple(sorted(held)))
    member = node in view.members
    scheduler = SCHEDULER in roles and member
    mine = _assigned(node, view.assignment, shards) if scheduler else set()
    return replace(
        _shard_moves(lease, view, held, mine),
        campaign=scheduler and view.leader is None,
        watch=member and may_watch and view.watchdog is None,
        resign=not may_watch and view.watchdog_lease == lease,
        assignment=_reassignment(lease, view, shards),
    )


def _reassignment(lease: int, view: View, shards: int) -> tuple[str | None, ...] | None:
    """The assignment the leader publishes when the schedulers changed (None: not the leader, or
    the published one still holds)."""
    if view.leader_lease != lease:
        return None
    wanted = rendezvous(shards, view.schedulers())
    return wanted if wanted != view.assignment else None


def _shard_moves(lease: int, view: View, held: Mapping[int, int], mine: set[int]) -> Plan:
    """How this node's shards move toward ``mine``: release what is no longer its (held, or its
    key in etcd), drop what it holds but whose key is gone or another's, adopt its keys it does
    not hold yet, and acquire the free shards assigned to it."""
    ours = {shard: key for shard, key in view.shards.items() if key.lease == lease}
    release = {shard: epoch for shard, epoch in held.items() if shard not in mine}
    release.update({shard: key.epoch for shard, key in ours.items() if shard not in mine})
    drop = [
        shard
        for shard, epoch in held.items()
        if shard in mine and view.revision >= epoch and shard not in ours
    ]
    adopt = {
        shard: key.epoch for shard, key in ours.items() if shard in mine and held.get(shard) != key.epoch
    }
    acquire = [shard for shard in sorted(mine) if shard not in view.shards and shard not in held]
    return Plan(acquire=tuple(acquire), release=release, adopt=adopt, drop=tuple(drop))


def _assigned(node: str, assignment: tuple[str | None, ...] | None, shards: int) -> set[int]:
    if assignment is None or len(assignment) != shards:
        return set()
    return {shard for shard, owner in enumerate(assignment) if owner == node}


# -- values stored in etcd ------------------------------------------------------------------------


def encode_assignment(owners: tuple[str | None, ...]) -> bytes:
    return json.dumps({"owners": list(owners)}, separators=(",", ":")).encode()


def decode_assignment(raw: bytes) -> tuple[str | None, ...] | None:
    try:
        owners = json.loads(raw)["owners"]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(owners, list) or not all(owner is None or isinstance(owner, str) for owner in owners):
        return None
    return tuple(owners)

"""The local copy of the coordinator's keys in etcd, and what the decisions read from it.

The watch task keeps one :class:`Mirror` per node: every key under the prefix, complete up to
:attr:`Mirror.revision` (0: unknown, read everything again). :meth:`Mirror.view` is what
:func:`cronwheel.coordinator.plan.decide` decides on, :meth:`Mirror.schedulers` what the session
needs to decide whether to sit out (:class:`cronwheel.coordinator.session.Beat`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from cronwheel.coordinator.etcd_api import Event, KeyValue
from cronwheel.coordinator.plan import LEADER, SCHEDULER, WATCHDOG, ShardKey, View, decode_assignment


class Mirror:
    """Every key under ``root`` (which ends with ``/``) as of :attr:`revision`."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.kvs: dict[str, KeyValue] = {}
        self.revision = 0

    def load(self, revision: int, kvs: Iterable[KeyValue]) -> None:
        """Replace the copy with a full read made at ``revision``."""
        self.kvs = {kv.key: kv for kv in kvs}
        self.revision = revision

    def apply(self, events: Sequence[Event]) -> None:
        for event in events:
            if event.type == "PUT":
                self.kvs[event.kv.key] = event.kv
            else:
                self.kvs.pop(event.kv.key, None)
            self.revision = max(self.revision, event.kv.mod_revision)

    def forget(self) -> None:
        """The copy can no longer be trusted: the next read is a full one."""
        self.revision = 0

    def view(self) -> View:
        members: dict[str, tuple[str, ...]] = {}
        shards: dict[int, ShardKey] = {}
        leader, leader_lease = None, 0
        watchdog, watchdog_lease = None, 0
        assignment, assignment_revision = None, 0
        for key, kv in self.kvs.items():
            name = key[len(self.root) :]
            if name.startswith("members/"):
                members[name.removeprefix("members/")] = member_record(kv.value).roles
            elif name == LEADER:
                leader, leader_lease = kv.value.decode(errors="replace"), kv.lease
            elif name == WATCHDOG:
                watchdog, watchdog_lease = kv.value.decode(errors="replace"), kv.lease
            elif name == "assignment":
                assignment, assignment_revision = decode_assignment(kv.value), kv.mod_revision
            elif name.startswith("shards/") and name.removeprefix("shards/").isdigit():
                shard = int(name.removeprefix("shards/"))
                shards[shard] = ShardKey(kv.value.decode(errors="replace"), kv.lease, kv.create_revision)
        return View(
            self.revision,
            members,
            leader,
            leader_lease,
            watchdog,
            watchdog_lease,
            assignment,
            assignment_revision,
            shards,
        )

    def schedulers(self, but: str) -> dict[str, int]:
        """Scheduler members other than ``but``, with the revision their member key was created
        at (a member that joined again since has a newer one)."""
        root = self.root + "members/"
        return {
            key[len(root) :]: kv.create_revision
            for key, kv in self.kvs.items()
            if key.startswith(root) and key[len(root) :] != but and SCHEDULER in member_record(kv.value).roles
        }


@dataclass(frozen=True, slots=True)
class MemberRecord:
    """What a node stores in its member key."""

    roles: tuple[str, ...] = ()
    since: datetime | None = None
    metrics_url: str | None = None


def member_record(raw: bytes) -> MemberRecord:
    """The record stored in a member key (an empty one, if it cannot be read)."""
    try:
        data = json.loads(raw)
        roles = tuple(str(role) for role in data.get("roles", []))
        since = datetime.fromisoformat(data["since"]) if data.get("since") else None
        url = data.get("metrics_url")
    except (ValueError, TypeError, AttributeError):
        return MemberRecord()
    return MemberRecord(roles, since, url if isinstance(url, str) else None)


def encode_member(roles: Sequence[str], since: datetime, metrics_url: str | None = None) -> bytes:
    record: dict[str, object] = {"roles": list(roles), "since": since.isoformat()}
    if metrics_url is not None:
        record["metrics_url"] = metrics_url
    return json.dumps(record).encode()

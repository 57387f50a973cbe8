"""``EtcdCoordinator``: membership, leadership and fenced shard leases on etcd (cluster mode).

**Why a client of our own.** cronwheel talks to etcd through etcd's v3 JSON gateway (plain HTTP
POSTs under ``/v3/``, served by every etcd since 3.4) with a thin client of about three hundred lines
(:mod:`cronwheel.coordinator.etcd_client`) on one shared aiohttp session, the HTTP library cronwheel
already ships for webhooks. The alternatives are gRPC clients (``etcd3``, ``aetcd``, ``etcd3-py``):
they pull in grpcio and protobuf, pin generated stubs to particular protobuf releases and have
repeatedly lagged behind them (installs that break when protobuf moves, or that hold protobuf back
for everything else in the process), and the sync ones would need threads under asyncio. We use
six calls (range, put, txn, lease grant/keepalive/revoke, watch), and the gateway serves all of them.

**What it costs.** JSON and base64 instead of protobuf (a few hundred bytes per call: nothing at
our rates); every lease keepalive is one HTTP request instead of a message on a long-lived gRPC
stream; a watch is one long HTTP response per node, and a silently dead connection (partition,
not a restart) is only noticed when the heartbeat fails, whereupon the watch is re-opened from its
last revision; no client-side load balancing beyond moving to the next endpoint after a failure;
and we own the (small) protocol code and its tests, which run against a real etcd.

**Keys** (under ``prefix``)::

    members/{node}   {"roles": [...], "since": ISO time}  attached to the node's lease
    leader           node name, attached to the leader's lease; created only if absent
    assignment       {"owners": [node for each shard]}    written by the leader, revision-guarded
    shards/{shard}   node name, attached to the owner's lease; created only if absent

**Epochs.** A shard key is only ever created (compare ``create_revision == 0``), never updated,
so its create revision, the revision of the transaction that created it, is the owner's fencing
epoch. etcd revisions grow with every write in the cluster, so each new owner's epoch is strictly
greater than every earlier one. (They restart only if etcd's data is wiped: see *Lost lease*.)

**Local deadline.** Every shard key lives on the node's lease, so the node owns its shards exactly
as long as etcd keeps that lease. etcd expires the lease no earlier than ``ttl`` after it received
the last keepalive, which is after the node *sent* it; the node therefore claims its shards only
until ``send time of the last successful keepalive + ttl - safety margin`` (margin
``min(max(1 s, ttl/5), ttl/2)`` unless given), and ``owned_shards()`` is empty after that. A node
that cannot renew (etcd down, partition, process paused) stops claiming before any other node can
create the key. Keepalives go out every ``ttl/3``. etcd leases last whole seconds (and at least
about 2 s with etcd's default election timeout): the node asks for ``ceil(ttl)``, etcd may grant
more, and the local deadline always uses ``ttl``, never more than what etcd granted.

**Lost lease.** A node whose lease is gone (it expired while the node was cut off, or etcd lost
its data) drops every shard, joins again with a new lease, and acquires nothing for one TTL:
by then every claim made under the old etcd state has lapsed, even where etcd forgot the keys
that would have kept the new lease out. A wiped etcd also restarts its revisions, so epochs go
back to small numbers that the store refuses as stale; restore etcd from a snapshot instead.

Three tasks do the work: *session* (lease, member key, heartbeats, re-registering after the lease
is lost), *watch* (a local copy of every key under the prefix, resumed from the last revision
seen, re-read whole when that revision was compacted) and *reconcile* (:func:`plan.decide` on
that copy, carried out with conditional transactions).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta

from cronwheel.clock import Clock
from cronwheel.coordinator.etcd_client import (
    EtcdClient,
    EtcdUnavailableError,
    Event,
    KeyValue,
    LeaseNotFoundError,
    cmp_create,
    cmp_lease,
    cmp_mod,
    op_delete,
    op_get,
    op_put,
    prefix_end,
)
from cronwheel.coordinator.plan import (
    SCHEDULER,
    Plan,
    ShardKey,
    View,
    decide,
    decode_assignment,
    encode_assignment,
)
from cronwheel.coordinator.port import Member, ShardLease
from cronwheel.errors import InvalidInputError
from cronwheel.model import SHARDS

log = logging.getLogger("cronwheel.coordinator.etcd")

_PARALLEL = 32  # shard transactions in flight at once


def default_safety_margin(ttl_s: float) -> float:
    return min(max(1.0, ttl_s / 5), ttl_s / 2)


def _backoff(failures: int, cap_s: float) -> float:
    """0.1 s, 0.2 s, 0.4 s ... up to ``cap_s``, with jitter so nodes do not retry in step."""
    delay: float = min(cap_s, 0.1 * 2 ** min(failures - 1, 10))
    return delay * random.uniform(0.75, 1.0)  # noqa: S311 - jitter, not cryptography


class EtcdCoordinator:
    """The :class:`~cronwheel.coordinator.port.Coordinator` of a cluster, on etcd."""

    def __init__(
        self,
        endpoints: Sequence[str],
        node: str,
        roles: tuple[str, ...],
        clock: Clock,
        *,
        ttl_s: float = 5.0,
        shards: int = SHARDS,
        prefix: str = "/cronwheel",
        safety_margin_s: float | None = None,
    ) -> None:
        if ttl_s < 1:
            raise InvalidInputError("etcd leases last whole seconds: the coordinator TTL must be >= 1 s")
        margin = default_safety_margin(ttl_s) if safety_margin_s is None else safety_margin_s
        if not 0 <= margin < ttl_s:
            raise InvalidInputError("the lease safety margin must be at least 0 and less than the TTL")
        if not node or "/" in node:
            raise InvalidInputError(f"node name {node!r} must be non-empty and without '/'")
        self.node = node
        self.roles = roles
        self.ttl_s = ttl_s
        self.safety_margin_s = margin
        self._clock = clock
        self._shards = shards
        self._prefix = prefix.rstrip("/")
        self._client = EtcdClient(endpoints, request_timeout_s=max(1.0, min(2.0, ttl_s / 2)))
        self._since: datetime | None = None
        # session
        self._lease = 0
        self._renewed_at = -math.inf  # monotonic send time of the last successful grant/keepalive
        self._lease_lost = asyncio.Event()
        self._expiry: asyncio.TimerHandle | None = None
        self._healthy: Callable[[], bool] = _always  # heartbeat only while this node can do its work
        self.hold_s = 5 * ttl_s  # after a step-down, rejoin this much later while others serve
        self._unhealthy_at = -math.inf  # monotonic: when the health check last said no
        self._trouble_revision: int | None = None  # the view's revision when it first said no
        self._sitting_out = False
        # the local copy of every key under the prefix, complete up to _revision (0: re-read)
        self._kvs: dict[str, KeyValue] = {}
        self._revision = 0
        # shard -> epoch, held under the current lease
        self._held: dict[int, int] = {}
        self._acquire_after = -math.inf  # monotonic: no acquisitions before (after a lost lease)
        self._changed = asyncio.Event()  # for wait_for_change
        self._dirty = asyncio.Event()  # for the reconcile task
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._retired: set[asyncio.Task[None]] = set()  # cancelled, maybe not finished yet

    # -- keys

    def _key(self, *parts: str) -> str:
        return "/".join((self._prefix, *parts))

    def _shard_key(self, shard: int) -> str:
        return self._key("shards", str(shard))

    # -- the port

    async def start(self) -> None:
        """Join: a lease, the member key, a first read of the cluster's keys; then the background
        tasks. Raises :class:`EtcdUnavailableError` (retryable) when etcd cannot be reached."""
        if self._tasks:
            return
        self._since = self._since or self._clock.now()
        try:
            await self._register()
            await self._full_read()
        except BaseException:
            await self._client.close()
            raise
        self._spawn("session", self._session_loop())
        self._spawn("watch", self._watch_loop())
        self._spawn("reconcile", self._reconcile_loop())

    async def stop(self, *, revoke: bool = True) -> None:
        """Leave. Revoking the lease deletes this node's keys at once (fast handover);
        ``revoke=False`` leaves them to expire, as a crash would."""
        tasks = [*self._tasks.values(), *self._retired]
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._expiry is not None:
            self._expiry.cancel()
        lease, self._lease = self._lease, 0
        self._renewed_at = -math.inf
        self._held.clear()
        self._notify()
        if revoke and lease:
            try:
                await self._client.revoke(lease)
                log.info("left the cluster", extra={"action": "leave", "node": self.node})
            except (EtcdUnavailableError, LeaseNotFoundError) as error:
                log.warning(
                    "could not revoke the lease; it will expire",
                    extra={"action": "leave", "node": self.node, "error": str(error)},
                )
        await self._client.close()

    def owned_shards(self) -> dict[int, ShardLease]:
        valid_until = self._valid_until()
        if time.monotonic() >= valid_until:
            return {}
        return {shard: ShardLease(shard, epoch, valid_until) for shard, epoch in self._held.items()}

    async def members(self) -> list[Member]:
        _, kvs = await self._client.get_prefix(self._key("members", ""))
        records = [(kv, _member_record(kv.value)) for kv in kvs]
        beats = await asyncio.gather(*(self._last_heartbeat(kv) for kv, _ in records))
        found = []
        for (kv, (roles, since)), beat in zip(records, beats, strict=True):
            found.append(Member(kv.key.rsplit("/", 1)[-1], roles, since, beat))
        return sorted(found, key=lambda member: member.node)

    async def leader(self) -> str | None:
        """The leader key as etcd has it; while etcd cannot be reached, the leader this node last
        saw, and this node itself only while its own lease is still locally valid."""
        try:
            _, kvs = await self._client.range(self._key("leader"))
        except EtcdUnavailableError:
            view = self._view()
            if view.leader == self.node and (
                view.leader_lease != self._lease or time.monotonic() >= self._valid_until()
            ):
                return None
            return view.leader
        return kvs[0].value.decode() if kvs else None

    async def wait_for_change(self, timeout_s: float) -> None:
        """Returns when something changed since the previous return (at once if it already
        did), or after ``timeout_s``."""
        await _wait(self._changed, timeout_s)
        self._changed.clear()

    # -- the session: lease, member key, heartbeats

    async def _register(self) -> None:
        sent = time.monotonic()
        asked = math.ceil(self.ttl_s)
        lease, granted = await self._client.grant(asked)
        if granted > asked:
            log.info(
                "etcd raised the lease TTL to its minimum",
                extra={"action": "join", "node": self.node, "ttl_s": granted},
            )
        since = (self._since or self._clock.now()).isoformat()
        value = json.dumps({"roles": list(self.roles), "since": since}).encode()
        await self._client.put(self._key("members", self.node), value, lease)
        self._lease = lease
        self._lease_lost.clear()
        self._renewed(sent)
        self._dirty.set()
        self._notify()
        self._sitting_out = False
        log.info("joined the cluster", extra={"action": "join", "node": self.node, "lease": f"{lease:x}"})

    def set_health_check(self, healthy: Callable[[], bool]) -> None:
        """Heartbeat only while ``healthy()``: a node that cannot do its work (its store hangs or
        is unreachable) lets its lease lapse so that others take its shards within the TTL, and
        joins again, with a new lease, once ``healthy()`` is true again. If its lease did lapse
        and other schedulers are serving, it waits ``hold_s`` after the last unhealthy answer
        first: a node on a slow or flapping link would otherwise take its shards back the moment
        one call is quick, stall on them again, and make their slots late once per flap. When no
        other scheduler has served throughout (everyone's store was down), it joins at once."""
        self._healthy = healthy

    def _sits_out(self) -> bool:
        """Not rejoining yet: stepped down less than ``hold_s`` ago, and other schedulers that
        were members before this node's trouble began are still members (schedulers that
        rejoined since had the same trouble, and do not count)."""
        if self._lease or time.monotonic() >= self._unhealthy_at + self.hold_s:
            return False
        others = self._serving_since(self._trouble_revision or 0)
        if others and not self._sitting_out:
            log.info(
                "sitting out before rejoining: other schedulers serve meanwhile",
                extra={"action": "sit_out", "node": self.node, "hold_s": self.hold_s, "others": len(others)},
            )
        self._sitting_out = bool(others)
        return self._sitting_out

    def _serving_since(self, revision: int) -> list[str]:
        """Other scheduler members whose member key exists since ``revision`` or earlier."""
        root = self._key("members", "")
        return [
            key[len(root) :]
            for key, kv in self._kvs.items()
            if key.startswith(root)
            and key[len(root) :] != self.node
            and kv.create_revision <= revision
            and SCHEDULER in _member_record(kv.value)[0]
        ]

    def _report_unhealthy(self) -> None:
        if self._lease and time.monotonic() < self._valid_until():
            log.warning(
                "unhealthy: not renewing the lease, so that other nodes take the shards",
                extra={"action": "step_down", "node": self.node, "shards": len(self._held)},
            )

    async def _renew(self) -> None:
        lease = self._lease
        sent = time.monotonic()
        ttl = await self._client.keepalive(lease)
        if lease != self._lease:
            return
        if ttl <= 0:
            self._lose_lease("the lease expired at etcd")
            return
        self._renewed(sent)

    def _renewed(self, sent: float) -> None:
        self._trouble_revision = None  # healthy again in time, or joined again
        lapsed = time.monotonic() >= self._valid_until()
        self._renewed_at = max(self._renewed_at, sent)
        if self._expiry is not None:
            self._expiry.cancel()
        delay = self._valid_until() - time.monotonic()
        self._expiry = asyncio.get_running_loop().call_later(max(0.0, delay), self._lapsed)
        if lapsed and self._held:
            log.info("lease renewed again", extra={"action": "renew", "node": self.node})
            self._notify()

    def _lapsed(self) -> None:
        """The local deadline passed without a renewal: the shards are no longer claimed."""
        if self._held:
            log.warning(
                "lease not renewed in time: not claiming shards",
                extra={"action": "lapse", "node": self.node, "shards": len(self._held)},
            )
        self._notify()

    def _valid_until(self) -> float:
        if not self._lease:
            return -math.inf
        return self._renewed_at + self.ttl_s - self.safety_margin_s

    def _lose_lease(self, reason: str) -> None:
        if not self._lease:
            return
        log.warning(
            "lost the lease: dropping every shard and joining again",
            extra={"action": "lapse", "node": self.node, "reason": reason, "shards": len(self._held)},
        )
        self._lease = 0
        self._renewed_at = -math.inf
        self._held.clear()
        self._notify()
        self._lease_lost.set()
        # If etcd lost its data, other nodes may still claim shards under leases that no longer
        # exist, until their local deadlines (at most a TTL from now): acquire nothing before.
        self._acquire_after = time.monotonic() + self.ttl_s
        asyncio.get_running_loop().call_later(self.ttl_s, self._dirty.set)
        # etcd may have lost its data as well: rebuild the view from scratch.
        self._revision = 0
        self._restart_watch()

    async def _session_loop(self) -> None:
        failures = 0
        while True:
            if failures:
                await asyncio.sleep(_backoff(failures, self.ttl_s / 3))
            elif self._lease:
                await _wait(self._lease_lost, self.ttl_s / 3)  # next heartbeat, or at once when lost
            if not self._healthy():
                self._report_unhealthy()
                self._unhealthy_at = time.monotonic()
                if self._trouble_revision is None:
                    self._trouble_revision = self._revision
                await asyncio.sleep(self.ttl_s / 3)
                continue
            if self._sits_out():
                await asyncio.sleep(self.ttl_s / 3)
                continue
            try:
                if self._lease:
                    await self._renew()
                else:
                    await self._register()
            except EtcdUnavailableError as error:
                failures += 1
                if failures == 1 or failures % 50 == 0:
                    log.warning(
                        "etcd unreachable, retrying with backoff",
                        extra={
                            "action": "wait",
                            "backend": "etcd",
                            "node": self.node,
                            "failures": failures,
                            "error": str(error),
                        },
                    )
                continue
            except Exception:  # a refusal or a bug: keep heartbeating rather than die silently
                failures += 1
                log.exception("heartbeat failed", extra={"action": "wait", "node": self.node})
                continue
            if failures:
                log.info(
                    "etcd reachable again",
                    extra={"action": "reconnect", "backend": "etcd", "node": self.node, "failures": failures},
                )
                failures = 0
                self._restart_watch()  # the old stream may be hanging on a dead connection

    # -- the watch: a local copy of every key under the prefix

    async def _full_read(self) -> None:
        revision, kvs = await self._client.get_prefix(self._key(""))
        self._kvs = {kv.key: kv for kv in kvs}
        self._revision = revision
        self._dirty.set()
        self._notify()

    def _apply(self, events: Sequence[Event]) -> None:
        for event in events:
            if event.type == "PUT":
                self._kvs[event.kv.key] = event.kv
            else:
                self._kvs.pop(event.kv.key, None)
            self._revision = max(self._revision, event.kv.mod_revision)
        self._dirty.set()
        self._notify()

    async def _watch_loop(self) -> None:
        failures = 0
        prefix = self._key("")
        while True:
            try:
                if not self._revision:
                    await self._full_read()
                stream = self._client.watch(prefix, prefix_end(prefix), self._revision + 1)
                async with contextlib.aclosing(stream):
                    async for batch in stream:
                        if batch.canceled:
                            log.info(
                                "watch cancelled by etcd: reading every key again",
                                extra={
                                    "action": "rewatch",
                                    "node": self.node,
                                    "compact_revision": batch.compact_revision,
                                    "reason": batch.reason,
                                },
                            )
                            self._revision = 0
                            break
                        if batch.events:
                            self._apply(batch.events)
                        failures = 0
            except EtcdUnavailableError as error:
                failures += 1
                if failures == 1:
                    log.info(
                        "watch interrupted, resuming",
                        extra={"action": "rewatch", "node": self.node, "error": str(error)},
                    )
                await asyncio.sleep(_backoff(failures, 2.0))
            except Exception:
                failures += 1
                log.exception("watch failed, reading every key again", extra={"node": self.node})
                self._revision = 0
                await asyncio.sleep(_backoff(failures, 2.0))

    def _restart_watch(self) -> None:
        task = self._tasks.get("watch")
        if task is None or task is asyncio.current_task():
            return
        task.cancel()
        self._retired.add(task)  # awaited by stop()
        task.add_done_callback(self._retired.discard)
        self._spawn("watch", self._watch_loop())

    def _view(self) -> View:
        members: dict[str, tuple[str, ...]] = {}
        shards: dict[int, ShardKey] = {}
        leader, leader_lease = None, 0
        assignment, assignment_revision = None, 0
        root = len(self._key(""))
        for key, kv in self._kvs.items():
            name = key[root:]
            if name.startswith("members/"):
                members[name.removeprefix("members/")] = _member_record(kv.value)[0]
            elif name == "leader":
                leader, leader_lease = kv.value.decode(errors="replace"), kv.lease
            elif name == "assignment":
                assignment, assignment_revision = decode_assignment(kv.value), kv.mod_revision
            elif name.startswith("shards/") and name.removeprefix("shards/").isdigit():
                shard = int(name.removeprefix("shards/"))
                shards[shard] = ShardKey(kv.value.decode(errors="replace"), kv.lease, kv.create_revision)
        return View(self._revision, members, leader, leader_lease, assignment, assignment_revision, shards)

    # -- reconcile: decide on the local copy, act with conditional transactions

    async def _reconcile_loop(self) -> None:
        failures = 0
        while True:
            await _wait(self._dirty, self.ttl_s / 2)
            self._dirty.clear()
            try:
                await self._reconcile()
                failures = 0
            except LeaseNotFoundError:
                self._lose_lease("etcd no longer knows the lease")
            except EtcdUnavailableError as error:
                failures += 1
                log.debug("reconcile failed", extra={"node": self.node, "error": str(error)})
                self._dirty.set()
                await asyncio.sleep(_backoff(failures, self.ttl_s / 3))
            except Exception:
                failures += 1
                log.exception("reconcile failed", extra={"node": self.node})
                self._dirty.set()
                await asyncio.sleep(_backoff(failures, self.ttl_s))

    async def _reconcile(self) -> None:
        lease = self._lease
        if not lease or not self._revision:
            return
        view = self._view()
        plan = decide(self.node, self.roles, lease, view, self._held, self._shards)
        if not plan:
            return
        self._settle(plan)
        if plan.campaign:
            await self._campaign(lease)
        if plan.assignment is not None:
            await self._publish(lease, plan.assignment, view)
        jobs = [functools.partial(self._release, shard, epoch) for shard, epoch in plan.release.items()]
        if self._acquire_after <= time.monotonic() < self._valid_until():
            jobs += [functools.partial(self._acquire, lease, shard) for shard in plan.acquire]
        await _bounded(jobs)
        if plan.acquire or plan.release:
            log.info(
                "shards rebalanced",
                extra={
                    "action": "own",
                    "node": self.node,
                    "shards": len(self._held),
                    "released": len(plan.release),
                },
            )

    def _settle(self, plan: Plan) -> None:
        """The local half of a plan, done first: stop claiming before anything is deleted."""
        before = dict(self._held)
        for shard in (*plan.release, *plan.drop):
            self._held.pop(shard, None)
        self._held.update(plan.adopt)
        if self._held != before:
            self._notify()

    async def _campaign(self, lease: int) -> None:
        key = self._key("leader")
        result = await self._client.txn([cmp_create(key, 0)], [op_put(key, self.node.encode(), lease)])
        if result.succeeded:
            log.info("elected leader", extra={"action": "lead", "node": self.node})

    async def _publish(self, lease: int, owners: tuple[str | None, ...], view: View) -> None:
        key = self._key("assignment")
        result = await self._client.txn(
            [cmp_lease(self._key("leader"), lease), cmp_mod(key, view.assignment_revision)],
            [op_put(key, encode_assignment(owners))],
        )
        if result.succeeded:
            old = view.assignment or (None,) * len(owners)
            moved = sum(1 for a, b in zip(old, owners, strict=False) if a != b)
            log.info(
                "published the shard assignment",
                extra={
                    "action": "assign",
                    "node": self.node,
                    "nodes": len(view.schedulers()),
                    "moved": moved,
                },
            )

    async def _acquire(self, lease: int, shard: int) -> None:
        key = self._shard_key(shard)
        result = await self._client.txn([cmp_create(key, 0)], [op_put(key, self.node.encode(), lease)])
        if result.succeeded and lease == self._lease:
            self._held[shard] = result.revision  # the create revision: this ownership's epoch
            self._notify()

    async def _release(self, shard: int, epoch: int) -> None:
        key = self._shard_key(shard)
        await self._client.txn([cmp_create(key, epoch)], [op_delete(key)], [op_get(key)])

    # -- helpers

    def _notify(self) -> None:
        self._changed.set()

    def _spawn(self, name: str, work: Awaitable[None]) -> None:
        async def run() -> None:
            try:
                await work
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("coordinator task failed", extra={"node": self.node, "task": name})
                raise

        self._tasks[name] = asyncio.create_task(run(), name=f"etcd-coordinator-{self.node}-{name}")

    async def _last_heartbeat(self, kv: KeyValue) -> datetime | None:
        if kv.lease == self._lease and self._lease:
            return self._clock.now() - timedelta(seconds=time.monotonic() - self._renewed_at)
        if not kv.lease:
            return None
        try:
            remaining, granted = await self._client.time_to_live(kv.lease)
        except (EtcdUnavailableError, LeaseNotFoundError):
            return None
        if remaining < 0:
            return None
        return self._clock.now() - timedelta(seconds=max(0, granted - remaining))


def _always() -> bool:
    return True


async def _wait(event: asyncio.Event, timeout_s: float) -> None:
    """Until ``event`` is set or ``timeout_s`` passed. (Not ``asyncio.wait_for``: on Python 3.11
    it can swallow a cancellation that arrives as the event fires, and ``stop()`` would hang.)"""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout_s):
            await event.wait()


async def _bounded(jobs: Sequence[Callable[[], Awaitable[None]]]) -> None:
    """Run ``jobs`` with at most ``_PARALLEL`` in flight; all finish before the first error is
    raised (a transaction that may have been applied must not be abandoned half way)."""
    gate = asyncio.Semaphore(_PARALLEL)

    async def one(job: Callable[[], Awaitable[None]]) -> None:
        async with gate:
            await job()

    results = await asyncio.gather(*(one(job) for job in jobs), return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result


def _member_record(raw: bytes) -> tuple[tuple[str, ...], datetime | None]:
    try:
        data = json.loads(raw)
        roles = tuple(str(role) for role in data.get("roles", []))
        since = datetime.fromisoformat(data["since"]) if data.get("since") else None
    except (ValueError, TypeError, AttributeError):
        return (), None
    return roles, since

"""``EtcdCoordinator``: membership, leadership, the watchdog duty and fenced shard leases on etcd
(cluster mode).

**Why a client of our own.** cronwheel talks to etcd through etcd's v3 JSON gateway (plain HTTP
POSTs under ``/v3/``, served by every etcd since 3.4) with a thin client of about three hundred lines
(:mod:`cronwheel.coordinator.etcd_client`) on one shared aiohttp session, the HTTP library cronwheel
already ships for webhooks. The alternatives are gRPC clients (``etcd3``, ``aetcd``, ``etcd3-py``):
they pin generated stubs to particular protobuf releases and have repeatedly lagged behind them,
and the sync ones would need threads under asyncio. We use a handful of calls (range, put, txn,
lease grant/keepalive/revoke/time-to-live, watch: the protocol
:class:`~cronwheel.coordinator.etcd_api.EtcdApi`), and the gateway serves all of them. grpcio is a
dependency (of the gRPC API), so aetcd 1.0 is the nearest alternative; measured against this
client (``benchmarks/bench_etcd_clients.py``; figures and decision in ``docs/dependencies.md``) it
is a fraction of a millisecond faster per call, but has no TLS, no token refresh, one endpoint, is
slower to resume a watch after an etcd restart, and needs an adapter as long as this client.

**What it costs.** JSON and base64 instead of protobuf (a few hundred bytes per call: nothing at
our rates); every lease keepalive is one HTTP request instead of a message on a long-lived gRPC
stream; a watch is one long HTTP response per node, and a silently dead connection (partition,
not a restart) is only noticed when the heartbeat fails, whereupon the watch is re-opened from its
last revision; no client-side load balancing beyond moving to the next endpoint after a failure;
and we own the (small) protocol code and its tests, which run against a real etcd.

**Keys** (under ``prefix``)::

    members/{node}   {"roles": [...], "since": ISO time}  attached to the node's lease
    leader           node name, attached to the leader's lease; created only if absent
    watchdog         node name, attached to its holder's lease; created only if absent (any member)
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

**Decisions are pure, the tasks are thin.** The lease session is carried out by
:class:`~cronwheel.coordinator.shell.LeaseShell` (its rules on failures too); the reconcile plan
is :func:`cronwheel.coordinator.plan.decide`, which also reads no clock. Three tasks do the I/O:
*session* (the shell's: grant and member key, keepalives, waits between them), *watch*
(:class:`~cronwheel.coordinator.mirror.Mirror`, a local copy of every key under the prefix,
resumed from the last revision seen, re-read whole when that revision was compacted or the lease
was lost) and *reconcile* (the plan, carried out with conditional transactions).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta

from cronwheel.clock import Clock
from cronwheel.coordinator.etcd_api import (
    EtcdApi,
    EtcdConfig,
    EtcdUnavailableError,
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
from cronwheel.coordinator.mirror import Mirror, encode_member, member_record
from cronwheel.coordinator.plan import LEADER, View, decide, encode_assignment
from cronwheel.coordinator.port import Member
from cronwheel.coordinator.session import (
    Acquired,
    Beat,
    Joined,
    LeaseGone,
    Renewed,
    SessionEvent,
    Stopped,
    Unreachable,
    default_safety_margin,
)
from cronwheel.coordinator.shell import (
    CoordinatorFailedError,
    LeaseShell,
    lease_terms,
    retry_policy,
    wait_for,
)
from cronwheel.errors import InvalidInputError
from cronwheel.model import SHARDS

log = logging.getLogger("cronwheel.coordinator.etcd")

_PARALLEL = 32  # shard transactions in flight at once
JOIN_ATTEMPTS = 3  # leases granted in one start() before it gives up as etcd being unavailable

__all__ = ["CoordinatorFailedError", "EtcdCoordinator", "default_safety_margin"]


class EtcdCoordinator(LeaseShell):
    """The :class:`~cronwheel.coordinator.port.Coordinator` of a cluster, on etcd."""

    _log = log
    _backend = "etcd"
    _title = "etcd"
    _task_prefix = "etcd"

    def __init__(
        self,
        client: EtcdApi,
        node: str,
        roles: tuple[str, ...],
        clock: Clock,
        *,
        ttl_s: float = 5.0,
        shards: int = SHARDS,
        prefix: str = "/cronwheel",
        safety_margin_s: float | None = None,
        hold_s: float | None = None,
        metrics_url: str | None = None,
    ) -> None:
        if ttl_s < 1:
            raise InvalidInputError("etcd leases last whole seconds: the coordinator TTL must be >= 1 s")
        if not node or "/" in node:
            raise InvalidInputError(f"node name {node!r} must be non-empty and without '/'")
        super().__init__(node, roles, clock, lease_terms(ttl_s, safety_margin_s, hold_s), shards, metrics_url)
        self._client = client
        self._prefix = prefix.rstrip("/")
        self._mirror = Mirror(self._key(""))
        self._retired: set[asyncio.Task[None]] = set()  # cancelled, maybe not finished yet

    @classmethod
    def connect(
        cls,
        config: EtcdConfig,
        node: str,
        roles: tuple[str, ...],
        clock: Clock,
        *,
        ttl_s: float = 5.0,
        shards: int = SHARDS,
        prefix: str = "/cronwheel",
        safety_margin_s: float | None = None,
        hold_s: float | None = None,
        metrics_url: str | None = None,
    ) -> EtcdCoordinator:
        """A coordinator on its own :class:`~cronwheel.coordinator.etcd_client.EtcdClient` for
        ``config``, whose requests time out well within the TTL."""
        from cronwheel.coordinator.etcd_client import EtcdClient  # noqa: PLC0415 - aiohttp on demand

        client = EtcdClient(config, request_timeout_s=max(1.0, min(2.0, ttl_s / 2)))
        return cls(
            client,
            node,
            roles,
            clock,
            ttl_s=ttl_s,
            shards=shards,
            prefix=prefix,
            safety_margin_s=safety_margin_s,
            hold_s=hold_s,
            metrics_url=metrics_url,
        )

    @property
    def hold_s(self) -> float:
        return self._session.terms.hold_s

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
            joined = await self._join_within(JOIN_ATTEMPTS)
            pace = self._step(joined)
            await self._full_read()
        except BaseException:
            self._step(Stopped())
            self._cancel_timers()
            await self._client.close()
            raise
        self._spawn("session", lambda: self._session_loop(pace))
        self._spawn("watch", self._watch_loop)
        self._spawn("reconcile", self._reconcile_loop)

    async def stop(self, *, revoke: bool = True) -> None:
        """Leave. Revoking the lease deletes this node's keys at once (fast handover);
        ``revoke=False`` leaves them to expire, as a crash would."""
        lease = await self._halt(*self._retired)
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

    async def members(self) -> list[Member]:
        self._check()
        root = self._key("members", "")
        _, kvs = await self._client.range(root, prefix_end(root))
        records = [(kv, member_record(kv.value)) for kv in kvs]
        beats = await asyncio.gather(*(self._last_heartbeat(kv) for kv, _ in records))
        found = []
        for (kv, record), beat in zip(records, beats, strict=True):
            node = kv.key.rsplit("/", 1)[-1]
            found.append(Member(node, record.roles, record.since, beat, record.metrics_url))
        return sorted(found, key=lambda member: member.node)

    async def _holder(self, duty: str) -> str | None:
        try:
            _, kvs = await self._client.range(self._key(duty))
        except EtcdUnavailableError:
            return self._seen_holder(*self._mirror.view().holder(duty))
        return kvs[0].value.decode() if kvs else None

    # -- the session's calls (the hooks of LeaseShell)

    def _beat(self, healthy: bool) -> Beat:
        """The mirror's revision, and the other schedulers with their member keys' create
        revisions."""
        return Beat(healthy, self._mirror.revision, self._mirror.schedulers(self.node))

    async def _join_within(self, attempts: int) -> Joined:
        """Join with a fresh lease each time one expired between its grant and the member key's
        put: a pause of the process (load, a stopped VM), not an outage, so it is asked again."""
        for _ in range(attempts):
            joined = await self._join()
            if isinstance(joined, Joined):
                return joined
        raise EtcdUnavailableError(f"{attempts} new leases expired before the member key was written")

    async def _join(self) -> SessionEvent:
        sent = self._monotonic.monotonic()
        asked = math.ceil(self.ttl_s)
        lease, granted = await self._client.grant(asked)
        if granted > asked:
            log.info(
                "etcd raised the lease TTL to its minimum",
                extra={"action": "join", "node": self.node, "ttl_s": granted},
            )
        value = encode_member(self.roles, self._since or self._clock.now(), self.metrics_url)
        try:
            await self._client.put(self._key("members", self.node), value, lease)
        except LeaseNotFoundError:  # it expired between the two calls (a long pause): again
            return Unreachable()
        return Joined(lease, sent)

    async def _renew(self, lease: int) -> SessionEvent:
        sent = self._monotonic.monotonic()
        try:
            ttl = await self._client.keepalive(lease)
        except LeaseNotFoundError:
            ttl = 0
        return Renewed(lease, sent, ttl)

    # -- the watch: a local copy of every key under the prefix

    async def _full_read(self) -> None:
        root = self._key("")
        revision, kvs = await self._client.range(root, prefix_end(root))
        self._mirror.load(revision, kvs)
        self._dirty.set()
        self._changed.set()

    async def _watch_loop(self) -> None:
        policy = retry_policy(2.0)
        retries = policy.tracker()
        prefix = self._key("")
        while True:
            try:
                if not self._mirror.revision:
                    await self._full_read()
                stream = self._client.watch(prefix, prefix_end(prefix), self._mirror.revision + 1)
                async with contextlib.aclosing(stream):
                    async for batch in stream:
                        if batch.canceled:
                            self._watch_cancelled(batch.compact_revision, batch.reason)
                            break
                        if batch.events:
                            self._mirror.apply(batch.events)
                            self._dirty.set()
                            self._changed.set()
                        retries.succeeded()
            except Exception as error:
                if not policy.retries(error):
                    raise
                if not retries.failures:
                    log.info(
                        "watch interrupted, resuming",
                        extra={"action": "rewatch", "node": self.node, "error": str(error)},
                    )
                await asyncio.sleep(retries.failed())

    def _watch_cancelled(self, compact_revision: int, reason: str) -> None:
        """etcd cancelled the watch: its start revision was compacted away (read everything
        again), or it refused the watch (a token it no longer accepts: the full read that
        follows authenticates again, after a pause)."""
        log.info(
            "watch cancelled by etcd: reading every key again",
            extra={
                "action": "rewatch",
                "node": self.node,
                "compact_revision": compact_revision,
                "reason": reason,
            },
        )
        self._mirror.forget()
        if not compact_revision:
            raise EtcdUnavailableError(f"etcd refused the watch: {reason}")

    def _resync(self) -> None:
        self._mirror.forget()
        self._restart_watch()

    def _restart_watch(self) -> None:
        task = self._tasks.get("watch")
        if task is None or task is asyncio.current_task():
            return
        task.cancel()
        self._retired.add(task)  # awaited by stop()
        task.add_done_callback(self._retired.discard)
        self._spawn("watch", self._watch_loop)

    # -- reconcile: decide on the local copy, act with conditional transactions

    async def _reconcile_loop(self) -> None:
        policy = retry_policy(self.ttl_s / 3)
        retries = policy.tracker()
        while True:
            await wait_for(self._dirty, self.ttl_s / 2)
            self._dirty.clear()
            lease = self._session.lease
            try:
                await self._reconcile(lease)
                retries.succeeded()
            except LeaseNotFoundError:
                self._step(LeaseGone(lease, "etcd no longer knows the lease"))
            except Exception as error:
                if not policy.retries(error):
                    raise
                log.debug("reconcile failed", extra={"node": self.node, "error": str(error)})
                self._dirty.set()
                await asyncio.sleep(retries.failed())

    async def _reconcile(self, lease: int) -> None:
        if not lease or not self._mirror.revision:
            return
        view = self._mirror.view()
        held = self._session.held
        plan = decide(self.node, self.roles, lease, view, held, self._shards, may_watch=self._may_watch())
        if not plan:
            return
        await self._settle(lease, plan)
        if plan.assignment is not None:
            await self._publish(lease, plan.assignment, view)
        jobs = [functools.partial(self._release, shard, epoch) for shard, epoch in plan.release.items()]
        if self._session.may_acquire(self._monotonic.monotonic()):
            jobs += [functools.partial(self._acquire, lease, shard) for shard in plan.acquire]
        await _bounded(jobs)
        if plan.acquire or plan.release:
            log.info(
                "shards rebalanced",
                extra={
                    "action": "own",
                    "node": self.node,
                    "shards": len(self._session.held),
                    "released": len(plan.release),
                },
            )

    async def _campaign(self, lease: int, duty: str) -> bool:
        """Create the ``duty`` key on ``lease`` if nobody holds it; whether this node now does."""
        key = self._key(duty)
        result = await self._client.txn([cmp_create(key, 0)], [op_put(key, self.node.encode(), lease)])
        return result.succeeded

    async def _resign(self, lease: int, duty: str) -> bool:
        """Delete the ``duty`` key if it is still held on ``lease``; whether it was."""
        key = self._key(duty)
        result = await self._client.txn([cmp_lease(key, lease)], [op_delete(key)])
        return result.succeeded

    async def _publish(self, lease: int, owners: tuple[str | None, ...], view: View) -> None:
        key = self._key("assignment")
        result = await self._client.txn(
            [cmp_lease(self._key(LEADER), lease), cmp_mod(key, view.assignment_revision)],
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
        if result.succeeded:  # its create revision is this ownership's epoch
            self._step(Acquired(lease, shard, result.revision))

    async def _release(self, shard: int, epoch: int) -> None:
        key = self._shard_key(shard)
        await self._client.txn([cmp_create(key, epoch)], [op_delete(key)], [op_get(key)])

    # -- helpers

    async def _last_heartbeat(self, kv: KeyValue) -> datetime | None:
        session = self._session
        if kv.lease == session.lease and session.lease:
            elapsed = self._monotonic.monotonic() - session.renewed_at
            return self._clock.now() - timedelta(seconds=elapsed)
        if not kv.lease:
            return None
        try:
            remaining, granted = await self._client.time_to_live(kv.lease)
        except (EtcdUnavailableError, LeaseNotFoundError):
            return None
        if remaining < 0:
            return None
        return self._clock.now() - timedelta(seconds=max(0, granted - remaining))


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

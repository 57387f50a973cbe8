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

**Decisions are pure, the tasks are thin.** The lease session (grant, renew, local deadline,
step-down, sit-out, lost lease, the shards held under the lease) is a state machine,
:func:`cronwheel.coordinator.session.next_step`; the reconcile plan is
:func:`cronwheel.coordinator.plan.decide`. Both read no clock: this shell passes them the
monotonic time of the injected clock (:func:`cronwheel.clock.monotonic_of`), and carries out what
they return. Three tasks do the I/O: *session* (the calls the state machine asks for: grant and
member key, keepalives, waits between them), *watch* (:class:`~cronwheel.coordinator.mirror.Mirror`,
a local copy of every key under the prefix, resumed from the last revision seen, re-read whole
when that revision was compacted or the lease was lost) and *reconcile* (the plan, carried out
with conditional transactions). Every state change is one synchronous ``next_step`` call, so the
tasks never see a half-updated session.

**Failures.** Each task waits out transient errors (etcd unreachable, no leader) with the retry
policy of :mod:`cronwheel.retrying`. Any other error (refused credentials or permissions, a bug)
stops the coordinator: it stops renewing, and ``owned_shards()``, ``leader()``, ``members()`` and
``wait_for_change()`` raise :class:`CoordinatorFailedError`, which stops a scheduler process as
the supervision rule says, instead of a node that keeps a lease it cannot serve.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta

from cronwheel.clock import Clock, monotonic_of
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
from cronwheel.coordinator.plan import LEADER, WATCHDOG, View, decide, encode_assignment
from cronwheel.coordinator.port import Member, ShardLease
from cronwheel.coordinator.session import (
    PACING,
    Acquired,
    Action,
    ArmDeadline,
    Beat,
    Join,
    Joined,
    Lapsed,
    LeaseGone,
    Notify,
    Reconcile,
    Renew,
    Renewed,
    RestartWatch,
    Resync,
    RetryLater,
    Say,
    Session,
    SessionEvent,
    Settled,
    Stopped,
    Terms,
    Unreachable,
    Wait,
    WakeSession,
    default_safety_margin,
    next_step,
)
from cronwheel.coordinator.shell import CoordinatorFailedError, always, retry_policy, wait_for
from cronwheel.errors import InvalidInputError
from cronwheel.model import SHARDS
from cronwheel.retrying import Backoff, Retries
from cronwheel.telemetry import metrics

log = logging.getLogger("cronwheel.coordinator.etcd")

_PARALLEL = 32  # shard transactions in flight at once
JOIN_ATTEMPTS = 3  # leases granted in one start() before it gives up as etcd being unavailable

__all__ = ["CoordinatorFailedError", "EtcdCoordinator", "default_safety_margin"]


class EtcdCoordinator:
    """The :class:`~cronwheel.coordinator.port.Coordinator` of a cluster, on etcd."""

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
        margin = default_safety_margin(ttl_s) if safety_margin_s is None else safety_margin_s
        if not 0 <= margin < ttl_s:
            raise InvalidInputError("the lease safety margin must be at least 0 and less than the TTL")
        if not node or "/" in node:
            raise InvalidInputError(f"node name {node!r} must be non-empty and without '/'")
        self.node = node
        self.roles = roles
        self.metrics_url = metrics_url  # stored in the member key, for `cluster status`
        self._clock = clock
        self._monotonic = monotonic_of(clock)
        self._client = client
        self._shards = shards
        self._prefix = prefix.rstrip("/")
        # after a step-down, rejoin this much later while others serve
        terms = Terms(ttl_s, margin, 5 * ttl_s if hold_s is None else hold_s)
        self._session = Session(terms)  # replaced whole by every step, never changed in place
        self._mirror = Mirror(self._key(""))
        self._healthy: Callable[[], bool] = always  # heartbeat only while this node can do its work
        self._may_watch: Callable[[], bool] = always  # hold the watchdog duty only while it can do it
        self._since: datetime | None = None
        self._changed = asyncio.Event()  # for wait_for_change
        self._dirty = asyncio.Event()  # for the reconcile task
        self._wake = asyncio.Event()  # interrupts the session task's wait: the lease is gone
        self._deadline: asyncio.TimerHandle | None = None  # sends Lapsed at the local deadline
        self._timers: set[asyncio.TimerHandle] = set()
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._retired: set[asyncio.Task[None]] = set()  # cancelled, maybe not finished yet
        self._failure: BaseException | None = None

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
    def ttl_s(self) -> float:
        return self._session.terms.ttl_s

    @property
    def safety_margin_s(self) -> float:
        return self._session.terms.margin_s

    @property
    def hold_s(self) -> float:
        return self._session.terms.hold_s

    @property
    def session(self) -> Session:
        """The lease session as it stands (a frozen record)."""
        return self._session

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
        tasks = [*self._tasks.values(), *self._retired]
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._cancel_timers()
        lease = self._session.lease
        self._step(Stopped())
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
        self._check()
        return self._session.owned(self._monotonic.monotonic())

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

    async def leader(self) -> str | None:
        """The leader key as etcd has it; while etcd cannot be reached, the leader this node last
        saw, and this node itself only while its own lease is still locally valid."""
        return await self._holder(LEADER)

    async def watchdog(self) -> str | None:
        """The holder of the watchdog duty, read as :meth:`leader` is."""
        return await self._holder(WATCHDOG)

    async def _holder(self, duty: str) -> str | None:
        self._check()
        try:
            _, kvs = await self._client.range(self._key(duty))
        except EtcdUnavailableError:
            holder, lease = self._mirror.view().holder(duty)
            session = self._session
            if holder == self.node and (
                lease != session.lease or not session.claims(self._monotonic.monotonic())
            ):
                return None
            return holder
        return kvs[0].value.decode() if kvs else None

    async def wait_for_change(self, timeout_s: float) -> None:
        """Returns when something changed since the previous return (at once if it already
        did), or after ``timeout_s``."""
        await wait_for(self._changed, timeout_s)
        self._changed.clear()
        self._check()

    def set_health_check(self, healthy: Callable[[], bool]) -> None:
        """Heartbeat only while ``healthy()``: a node that cannot do its work (its store hangs or
        is unreachable) lets its lease lapse so that others take its shards within the TTL, and
        joins again, with a new lease, once ``healthy()`` is true again. If its lease did lapse
        and other schedulers are serving, it waits ``hold_s`` after the last unhealthy answer
        first: a node on a slow or flapping link would otherwise take its shards back the moment
        one call is quick, stall on them again, and make their slots late once per flap. When no
        other scheduler has served throughout (everyone's store was down), it joins at once."""
        self._healthy = healthy

    def set_watchdog_check(self, able: Callable[[], bool]) -> None:
        """Campaign for the watchdog duty, and keep it, only while ``able()``: a holder whose
        notifier cannot reach the store deletes the key (at its next reconcile, within TTL/2),
        so that a member that can takes it over."""
        self._may_watch = able

    def _check(self) -> None:
        if self._failure is not None:
            raise CoordinatorFailedError(f"the etcd coordinator stopped: {self._failure!r}")

    # -- the session: carrying out what next_step decides

    def _step(self, event: SessionEvent) -> Action | None:
        """Feed ``event`` to the session; do its side effects now and return what the session
        task does next (join, renew, wait), if the event was one of its answers."""
        now = self._monotonic.monotonic()
        self._session, actions = next_step(self._session, now, event)
        pace = None
        for action in actions:
            if isinstance(action, PACING):
                pace = action
            else:
                self._do(action, now)
        return pace

    def _do(self, action: Action, now: float) -> None:
        loop = asyncio.get_running_loop()
        match action:
            case ArmDeadline(at=at):
                if self._deadline is not None:
                    self._deadline.cancel()
                self._deadline = loop.call_later(max(0.0, at - now), self._step, Lapsed())
            case Notify():
                self._changed.set()
            case Reconcile(at=at) if at <= now:
                self._dirty.set()
            case Reconcile(at=at):
                self._later(at - now, self._dirty.set)
            case WakeSession():
                self._wake.set()
            case Resync():
                self._mirror.forget()
                self._restart_watch()
            case RestartWatch():
                self._restart_watch()
            case Say(level=level, message=message, action=name, fields=fields):
                log.log(level, message, extra={"action": name, "node": self.node, **fields})
                if name == "lapse":  # the lease was lost, or not renewed in time
                    metrics.LEASES_LOST.inc()

    def _later(self, delay_s: float, callback: Callable[[], None]) -> None:
        handle: asyncio.TimerHandle

        def fire() -> None:
            self._timers.discard(handle)
            callback()

        handle = asyncio.get_running_loop().call_later(delay_s, fire)
        self._timers.add(handle)

    def _cancel_timers(self) -> None:
        for handle in (self._deadline, *self._timers):
            if handle is not None:
                handle.cancel()
        self._deadline = None
        self._timers.clear()

    async def _session_loop(self, pace: Action | None) -> None:
        policy = retry_policy(self.ttl_s / 3)
        retries = policy.tracker()
        while True:
            await self._pause(pace, retries)
            pace = self._step(
                Beat(self._healthy(), self._mirror.revision, self._mirror.schedulers(self.node))
            )
            if isinstance(pace, Join | Renew):
                pace = await self._call(pace, policy, retries)

    async def _pause(self, pace: Action | None, retries: Retries) -> None:
        """Wait as the session said: until its time (cut short when the lease is found lost), or
        the retry policy's next delay after a failed call."""
        if isinstance(pace, RetryLater):
            await asyncio.sleep(retries.failed())
        elif isinstance(pace, Wait):
            await wait_for(self._wake, pace.until - self._monotonic.monotonic())
        self._wake.clear()  # whatever woke it is what the next beat decides on

    async def _call(self, action: Join | Renew, policy: Backoff, retries: Retries) -> Action | None:
        """Carry out a join or renewal; the session's answer to how it went."""
        try:
            event = await (self._join() if isinstance(action, Join) else self._renew(action.lease))
        except Exception as error:
            if not policy.retries(error):
                raise
            attempt = retries.failures + 1
            if attempt == 1 or attempt % 50 == 0:
                log.warning(
                    "etcd unreachable, retrying with backoff",
                    extra={
                        "action": "wait",
                        "backend": "etcd",
                        "node": self.node,
                        "attempt": attempt,
                        "error": str(error),
                    },
                )
            event = Unreachable()
        else:
            retries.succeeded()
        return self._step(event)

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
        self._step(Settled(lease, plan))  # the local half first: stop claiming before deleting
        if plan.campaign and await self._campaign(lease, LEADER):
            metrics.LEADER_ELECTIONS.inc()
            log.info("elected leader", extra={"action": "lead", "node": self.node})
        if plan.watch and await self._campaign(lease, WATCHDOG):
            log.info("took the watchdog duty", extra={"action": "watch", "node": self.node})
        if plan.resign:
            await self._resign_watchdog(lease)
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

    async def _resign_watchdog(self, lease: int) -> None:
        """Delete the watchdog key if it is still held on ``lease``."""
        key = self._key(WATCHDOG)
        result = await self._client.txn([cmp_lease(key, lease)], [op_delete(key)])
        if result.succeeded:
            log.warning(
                "gave the watchdog duty up: this node cannot do it now",
                extra={"action": "resign", "node": self.node, "duty": WATCHDOG},
            )

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

    def _spawn(self, name: str, work: Callable[[], Awaitable[None]]) -> None:
        """Run ``work()`` as the named task. The coroutine is made inside the task: a task cancelled
        before its first step (a watch restarted during shutdown) leaves no coroutine un-awaited."""

        async def run() -> None:
            try:
                await work()
            except asyncio.CancelledError:
                raise
            except Exception as error:
                log.exception(
                    "coordinator task failed: the coordinator stops",
                    extra={"action": "fail", "node": self.node, "task": name},
                )
                self._failed(error)

        self._tasks[name] = asyncio.create_task(run(), name=f"etcd-coordinator-{self.node}-{name}")

    def _failed(self, error: BaseException) -> None:
        """Stop claiming and renewing; the port's calls raise from now on."""
        self._failure = error
        for task in self._tasks.values():
            if task is not asyncio.current_task():
                task.cancel()
        self._cancel_timers()
        self._step(Stopped())

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

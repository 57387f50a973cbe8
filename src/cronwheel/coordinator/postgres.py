"""``PostgresCoordinator``: membership, leadership, the watchdog duty and fenced shard leases as
rows in PostgreSQL, for a cluster that runs on PostgreSQL alone (no etcd).

**Why rows, not advisory locks.** A session-level advisory lock lasts as long as the server keeps
the session, and a half-open TCP connection (a partition that sent no RST) keeps it for as long as
the server's keepalives take to notice: the lock stays held while its node cannot reach the
database and cannot know whether it still holds it. A lease here is a row that ends by time,
judged by one clock: ``expires_at = clock_timestamp() + ttl``, set in SQL by the database; and the
node keeps a shorter deadline of its own, by its monotonic clock.

**Tables** (:mod:`cronwheel.store.schema`, migration 0021; instants in epoch microseconds):
``coordination_members`` (one row per node name: roles, incarnation, lease),
``coordination_duties`` (``leader`` and ``watchdog``: holder and lease; the leader's row also holds
the shard assignment it published) and ``coordination_shards`` (one row per shard: holder, lease,
fencing epoch). A holder is named by ``incarnation``, a random id drawn at every join.

**Rules, all in SQL on the database's clock.** A heartbeat renews, in one statement, the member
row and every duty and shard row of this incarnation, each only while it has not expired; it
renews nothing once the member row has. A campaign or an acquisition takes a row only when it is
free or expired (``expires_at < clock_timestamp()``), and only while this incarnation is a live
member. No node compares its own wall clock with the database's.

**Local deadline.** The lease session is :mod:`cronwheel.coordinator.session`, the etcd
coordinator's pure state machine: shards are claimed only until ``send time of the last
successful heartbeat + ttl - margin``. The database set every expiry from its clock *after* that
send, so a node that cannot renew stops claiming before any row it holds can expire. Every call
is bounded (connect, statement, pool checkout: :func:`statement_timeout`, TTL/3 kept within
0.5-2 s), so a hung connection surfaces as an error instead of a node that believes it is alive.
The coordinator has a small engine of its own on the URL: a busy store pool cannot starve it.

**Epochs.** A hand-over sets ``epoch = greatest(epoch, shard_epochs.epoch) + 1``: strictly greater
than every earlier owner's of that shard, and than any epoch the store has recorded for it (as an
etcd coordinator's revision, for a cluster that moved here from etcd), so the store's fencing
(``claim_shards``, ``shard_epochs``) works as with etcd.

**Changes.** Every write that changes membership or ownership sends ``NOTIFY cronwheel_coordination``
in its transaction; each node listens (:class:`~cronwheel.store.change_listener.PostgresChangeListener`,
which reconnects by itself) and re-reads the tables. A poll every TTL/2, and when the earliest
lease it saw expires, is the backstop (an expiry notifies nobody). The leader, the plan and the
rest follow the etcd coordinator (:func:`cronwheel.coordinator.plan.decide`); the lease session
(sit-out, step-down) is carried out by the shell both share,
:class:`~cronwheel.coordinator.shell.LeaseShell`, which also holds the health and watchdog checks
and the rules on failures.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field

from sqlalchemy import TextClause, exc, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from cronwheel.clock import Clock
from cronwheel.coordinator.plan import (
    LEADER,
    SCHEDULER,
    WATCHDOG,
    ShardKey,
    View,
    decide,
    decode_assignment,
    encode_assignment,
)
from cronwheel.coordinator.port import Member
from cronwheel.coordinator.session import (
    Acquired,
    Beat,
    Joined,
    Renewed,
    SessionEvent,
    Stopped,
)
from cronwheel.coordinator.shell import LeaseShell, lease_terms, retry_policy, wait_for
from cronwheel.errors import BackendUnavailableError, InvalidInputError, TransientError
from cronwheel.model import SHARDS
from cronwheel.store.change_listener import PostgresChangeListener
from cronwheel.store.driver import create_engine, translated_errors
from cronwheel.store.schema import from_micros, to_micros
from cronwheel.store.sql import SchemaOutdatedError

log = logging.getLogger("cronwheel.coordinator.postgres")

CHANNEL = "cronwheel_coordination"
POOL = (2, 2)  # connections kept open, and more at once: heartbeat, reconcile, a caller's read
FORGET_S = 86_400.0  # member rows expired this long ago are deleted at the next join
_UNDEFINED_TABLE = "42P01"  # SQLSTATE: the store's migrations have not reached 0021

__all__ = ["CHANNEL", "PostgresCoordinator", "Snapshot", "statement_timeout"]


def statement_timeout(ttl_s: float) -> float:
    """The bound on connecting, on each statement and on a pool checkout: TTL/3, within 0.5-2 s."""
    return max(0.5, min(2.0, ttl_s / 3))


# -- what one read of the tables shows (pure) -----------------------------------------------------


def _live(expires_at: int | None, now_us: int) -> bool:
    return expires_at is not None and expires_at >= now_us


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The live rows of the coordination tables as read at ``now_us`` (the database's clock).

    Built by :meth:`of` from raw rows: members ``(node, incarnation, roles, joined_at,
    expires_at)``, duties ``(duty, node, incarnation, expires_at, assignment)`` and shards
    ``(shard, node, incarnation, epoch, expires_at)``; a row counts only while it has not expired."""

    now_us: int
    members: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # node -> roles
    joined: Mapping[str, int] = field(default_factory=dict)  # node -> joined_at
    duties: Mapping[str, tuple[str, int]] = field(default_factory=dict)  # duty -> node, incarnation
    assignment: tuple[str | None, ...] | None = None
    shards: Mapping[int, ShardKey] = field(default_factory=dict)
    expiries: tuple[int, ...] = ()  # expires_at of every live row

    @classmethod
    def of(
        cls,
        now_us: int,
        members: Iterable[tuple[str, int, str, int, int]],
        duties: Iterable[tuple[str, str | None, int | None, int | None, str | None]],
        shards: Iterable[tuple[int, str | None, int | None, int, int | None]],
    ) -> Snapshot:
        live_members = [row for row in members if _live(row[4], now_us)]
        duty_rows = list(duties)
        live_duties = [row for row in duty_rows if _live(row[3], now_us) and row[1] and row[2]]
        live_shards = [row for row in shards if _live(row[4], now_us) and row[1] and row[2]]
        leader_row = next((row for row in duty_rows if row[0] == LEADER and row[4]), None)
        expiries = [row[4] for row in live_members] + [row[3] or 0 for row in live_duties]
        return cls(
            now_us,
            members={row[0]: tuple(filter(None, row[2].split(","))) for row in live_members},
            joined={row[0]: row[3] for row in live_members},
            duties={row[0]: (row[1] or "", row[2] or 0) for row in live_duties},
            assignment=decode_assignment(leader_row[4].encode()) if leader_row and leader_row[4] else None,
            shards={row[0]: ShardKey(row[1] or "", row[2] or 0, row[3]) for row in live_shards},
            expiries=tuple(sorted([*expiries, *(row[4] or 0 for row in live_shards)])),
        )

    def view(self) -> View:
        """The snapshot as the plan reads it. Its revision is the read's time in microseconds:
        every epoch it shows (a small counter per shard) is below it, as in etcd every key's
        revision is below the view's."""
        leader, leader_lease = self.duties.get(LEADER, (None, 0))
        watchdog, watchdog_lease = self.duties.get(WATCHDOG, (None, 0))
        return View(
            self.now_us,
            members=self.members,
            leader=leader,
            leader_lease=leader_lease,
            watchdog=watchdog,
            watchdog_lease=watchdog_lease,
            assignment=self.assignment,
            shards=self.shards,
        )

    def schedulers(self, node: str) -> dict[str, int]:
        """The other scheduler members, with when they joined (for the session's sit-out rule)."""
        return {
            other: self.joined[other]
            for other, roles in self.members.items()
            if other != node and SCHEDULER in roles
        }

    def expires_in_s(self) -> float | None:
        """Seconds (by the database's clock) until the first live row here expires, if any."""
        return (self.expiries[0] - self.now_us) / 1e6 if self.expiries else None

    def facts(self, node: str) -> tuple[object, ...]:
        """What ``wait_for_change`` is about: members, duty holders, the assignment and the other
        nodes' shards (``node``'s own ownership changes are the session's to announce)."""
        others = {shard: key for shard, key in self.shards.items() if key.node != node}
        return (dict(self.members), dict(self.duties), self.assignment, others)


def poll_delay(snapshot: Snapshot | None, read_at: float, now: float, poll_s: float) -> float:
    """How long to wait (from ``now``) before reading the tables again: ``poll_s``, or less to
    read right after the first lease seen in ``snapshot`` (read at ``read_at``) expires."""
    expires_in = snapshot.expires_in_s() if snapshot is not None else None
    if expires_in is None:
        return poll_s
    return max(0.0, min(poll_s, read_at + expires_in + 0.01 - now))


# -- SQL ------------------------------------------------------------------------------------------

_NOW_US = "(extract(epoch FROM clock_timestamp()) * 1000000)::bigint"  # exact: extract is numeric
_CLOCK = "WITH clock AS (SELECT " + _NOW_US + " AS now_us)"  # one reading per statement
_MINE = (  # this incarnation is a live member
    "EXISTS (SELECT 1 FROM coordination_members m WHERE m.node = :node"
    " AND m.incarnation = :incarnation AND m.expires_at >= clock.now_us)"
)


def _sql(statement: str) -> TextClause:
    """A statement with ``{clock}`` (the CTE of the database's time), ``{now}`` (that time) and
    ``{mine}`` (this incarnation is a live member) filled in: constants, never values."""
    return text(statement.replace("{clock}", _CLOCK).replace("{now}", _NOW_US).replace("{mine}", _MINE))


_SHARD_ROWS = _sql(
    "INSERT INTO coordination_shards (shard, epoch) SELECT s, 0 FROM generate_series(0, :last) AS s"
    " ON CONFLICT (shard) DO NOTHING"
)
_FORGET = _sql(
    "{clock} DELETE FROM coordination_members USING clock"
    " WHERE expires_at < clock.now_us - :forget_us AND node <> :node"
)
_JOIN = _sql(
    """{clock}
    INSERT INTO coordination_members
        (node, incarnation, roles, metrics_url, since, joined_at, renewed_at, expires_at)
    SELECT :node, :incarnation, :roles, :metrics_url, :since, now_us, now_us, now_us + :ttl_us FROM clock
    ON CONFLICT (node) DO UPDATE SET incarnation = EXCLUDED.incarnation, roles = EXCLUDED.roles,
        metrics_url = EXCLUDED.metrics_url, since = EXCLUDED.since, joined_at = EXCLUDED.joined_at,
        renewed_at = EXCLUDED.renewed_at, expires_at = EXCLUDED.expires_at"""
)
_RENEW = _sql(
    """{clock},
    member AS (
        UPDATE coordination_members SET renewed_at = clock.now_us, expires_at = clock.now_us + :ttl_us
        FROM clock WHERE node = :node AND incarnation = :incarnation AND expires_at >= clock.now_us
        RETURNING node),
    duties AS (
        UPDATE coordination_duties SET expires_at = clock.now_us + :ttl_us FROM clock
        WHERE incarnation = :incarnation AND expires_at >= clock.now_us AND EXISTS (SELECT 1 FROM member)),
    shards AS (
        UPDATE coordination_shards SET expires_at = clock.now_us + :ttl_us FROM clock
        WHERE incarnation = :incarnation AND expires_at >= clock.now_us AND EXISTS (SELECT 1 FROM member))
    SELECT count(*) FROM member"""
)
_CAMPAIGN = _sql(
    """{clock}
    INSERT INTO coordination_duties (duty, node, incarnation, expires_at)
    SELECT CAST(:duty AS varchar), CAST(:node AS varchar), CAST(:incarnation AS bigint),
        clock.now_us + :ttl_us
    FROM clock WHERE {mine}
    ON CONFLICT (duty) DO UPDATE SET node = EXCLUDED.node, incarnation = EXCLUDED.incarnation,
        expires_at = EXCLUDED.expires_at
    WHERE coordination_duties.expires_at IS NULL
       OR coordination_duties.expires_at < EXCLUDED.expires_at - :ttl_us
    RETURNING duty"""
)
_RESIGN = _sql(
    "UPDATE coordination_duties SET node = NULL, incarnation = NULL, expires_at = NULL"
    " WHERE duty = :duty AND incarnation = :incarnation RETURNING duty"
)
_PUBLISH = _sql(
    """{clock}
    UPDATE coordination_duties SET assignment = :assignment FROM clock
    WHERE duty = 'leader' AND incarnation = :incarnation AND expires_at >= clock.now_us
    RETURNING duty"""
)
# strictly above every earlier owner's epoch, and above what the store recorded for the shard
_ACQUIRE = _sql(
    """{clock}
    UPDATE coordination_shards s
    SET node = CAST(:node AS varchar), incarnation = CAST(:incarnation AS bigint),
        expires_at = clock.now_us + :ttl_us,
        epoch = greatest(s.epoch, coalesce((SELECT epoch FROM shard_epochs e WHERE e.shard = s.shard), 0)) + 1
    FROM clock
    WHERE s.shard = ANY(:shards) AND (s.expires_at IS NULL OR s.expires_at < clock.now_us) AND {mine}
    RETURNING s.shard, s.epoch"""
)
_RELEASE = _sql(
    """UPDATE coordination_shards SET node = NULL, incarnation = NULL, expires_at = NULL
    WHERE incarnation = :incarnation
      AND (shard, epoch) IN (SELECT * FROM unnest(CAST(:shards AS integer[]), CAST(:epochs AS bigint[])))
    RETURNING shard"""
)
_LEAVE = (
    _sql("DELETE FROM coordination_members WHERE node = :node AND incarnation = :incarnation"),
    _sql(
        "UPDATE coordination_duties SET node = NULL, incarnation = NULL, expires_at = NULL"
        " WHERE incarnation = :incarnation"
    ),
    _sql(
        "UPDATE coordination_shards SET node = NULL, incarnation = NULL, expires_at = NULL"
        " WHERE incarnation = :incarnation"
    ),
)
_NOTIFY = _sql("SELECT pg_notify(:channel, :node)")
_READ_NOW = _sql("SELECT {now}")
_READ_MEMBERS = _sql("SELECT node, incarnation, roles, joined_at, expires_at FROM coordination_members")
_READ_DUTIES = _sql("SELECT duty, node, incarnation, expires_at, assignment FROM coordination_duties")
_READ_SHARDS = _sql("SELECT shard, node, incarnation, epoch, expires_at FROM coordination_shards")
_MEMBERS = _sql(
    """{clock}
    SELECT node, roles, since, renewed_at, metrics_url FROM coordination_members, clock
    WHERE expires_at >= clock.now_us ORDER BY node"""
)
_HOLDER = _sql(
    "{clock} SELECT node FROM coordination_duties, clock WHERE duty = :duty AND expires_at >= clock.now_us"
)


# -- the coordinator ------------------------------------------------------------------------------


class PostgresCoordinator(LeaseShell):
    """The :class:`~cronwheel.coordinator.port.Coordinator` of a cluster, on PostgreSQL."""

    _log = log
    _backend = "postgres-coordinator"
    _title = "PostgreSQL"
    _task_prefix = "pg"

    def __init__(
        self,
        engine: AsyncEngine,
        listener: PostgresChangeListener,
        node: str,
        roles: tuple[str, ...],
        clock: Clock,
        *,
        ttl_s: float = 5.0,
        shards: int = SHARDS,
        safety_margin_s: float | None = None,
        hold_s: float | None = None,
        metrics_url: str | None = None,
    ) -> None:
        if ttl_s < 1:
            raise InvalidInputError("the coordinator TTL must be at least 1 s")
        if not node or len(node) > 200:
            raise InvalidInputError(f"node name {node!r} must be non-empty and at most 200 characters")
        super().__init__(node, roles, clock, lease_terms(ttl_s, safety_margin_s, hold_s), shards, metrics_url)
        self._engine = engine
        self._listener = listener
        self._snapshot: Snapshot | None = None
        self._read_at = 0.0  # monotonic time the snapshot was read
        self._notes = listener.subscribe()  # notifications on CHANNEL

    @classmethod
    def connect(
        cls,
        database_url: str,
        node: str,
        roles: tuple[str, ...],
        clock: Clock,
        *,
        ttl_s: float = 5.0,
        shards: int = SHARDS,
        safety_margin_s: float | None = None,
        hold_s: float | None = None,
        metrics_url: str | None = None,
    ) -> PostgresCoordinator:
        """A coordinator on its own engine and listening connection for ``database_url`` (the
        store's PostgreSQL URL, migrated to 0021 or later), every wait bounded by
        :func:`statement_timeout` (whatever timeouts the URL sets)."""
        url = make_url(database_url)
        if url.get_backend_name() != "postgresql":
            raise InvalidInputError("the PostgreSQL coordinator needs a postgresql:// URL")
        bound = statement_timeout(ttl_s)
        bounded = url.update_query_dict(
            {"connect_timeout": str(bound), "command_timeout": str(bound), "pool_timeout": str(bound)}
        )
        listener = PostgresChangeListener(
            database_url,
            channel=CHANNEL,
            max_backoff_s=max(0.1, ttl_s / 2),
            health_check_s=ttl_s,
            timeout_s=bound,
        )
        return cls(
            create_engine(bounded, pool_size=POOL[0], max_overflow=POOL[1]),
            listener,
            node,
            roles,
            clock,
            ttl_s=ttl_s,
            shards=shards,
            safety_margin_s=safety_margin_s,
            hold_s=hold_s,
            metrics_url=metrics_url,
        )

    @property
    def incarnation(self) -> int:
        """The id this node's rows carry since its last join (0: not a member)."""
        return self._session.lease

    # -- the port

    async def start(self) -> None:
        """Join (member row), listen, read the tables; then the background tasks. Raises
        :class:`~cronwheel.errors.BackendUnavailableError` when PostgreSQL cannot be reached."""
        if self._tasks:
            return
        self._since = self._since or self._clock.now()
        try:
            pace = self._step(await self._join())
            await self._listener.start()
            await self._read()
        except BaseException:
            self._step(Stopped())
            self._cancel_timers()
            await self._listener.stop()
            await self._engine.dispose()
            raise
        self._spawn("session", lambda: self._session_loop(pace))
        self._spawn("listen", self._listen_loop)
        self._spawn("reconcile", self._reconcile_loop)

    async def stop(self, *, leave: bool = True) -> None:
        """Leave: free this node's rows at once (fast handover); ``leave=False`` leaves them to
        expire, as a crash would."""
        incarnation = await self._halt()
        if leave and incarnation:
            try:
                await self._leave(incarnation)
                log.info("left the cluster", extra={"action": "leave", "node": self.node})
            except TransientError as error:
                log.warning(
                    "could not leave; the rows will expire",
                    extra={"action": "leave", "node": self.node, "error": str(error)},
                )
        await self._listener.stop()
        await self._engine.dispose()

    async def members(self) -> list[Member]:
        """Live members; ``last_heartbeat`` is the database's time of their last renewal."""
        self._check()
        async with self._connection() as connection:
            rows = (await connection.execute(_MEMBERS)).all()
        return [
            Member(
                row.node,
                tuple(filter(None, row.roles.split(","))),
                None if row.since is None else from_micros(row.since),
                from_micros(row.renewed_at),
                row.metrics_url,
            )
            for row in rows
        ]

    async def _holder(self, duty: str) -> str | None:
        try:
            async with self._connection() as connection:
                return (await connection.execute(_HOLDER, {"duty": duty})).scalar_one_or_none()
        except BackendUnavailableError:
            snapshot = self._snapshot
            holder, incarnation = snapshot.duties.get(duty, (None, 0)) if snapshot else (None, 0)
            return self._seen_holder(holder, incarnation)

    # -- the session's calls (the hooks of LeaseShell)

    def _beat(self, healthy: bool) -> Beat:
        """The last snapshot's time (as the view's revision), and the other schedulers with when
        they joined; nothing but ``healthy`` before the first read."""
        snapshot = self._snapshot
        if snapshot is None:
            return Beat(healthy)
        return Beat(healthy, snapshot.now_us, snapshot.schedulers(self.node))

    def _resync(self) -> None:
        """A fresh read: every reconcile reads the tables whole, so there is no copy to forget."""
        self._dirty.set()

    def _restart_watch(self) -> None:
        """A fresh read: the listener reconnects by itself."""
        self._dirty.set()

    # -- statements

    @contextlib.asynccontextmanager
    async def _transaction(self) -> AsyncIterator[AsyncConnection]:
        with translated_errors():
            async with self._engine.begin() as connection:
                yield connection

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[AsyncConnection]:
        with translated_errors():
            async with self._engine.connect() as connection:
                yield connection

    async def _notify(self, connection: AsyncConnection) -> None:
        await connection.execute(_NOTIFY, {"channel": CHANNEL, "node": self.node})

    def _ids(self, incarnation: int) -> dict[str, object]:
        return {"node": self.node, "incarnation": incarnation, "ttl_us": round(self.ttl_s * 1e6)}

    async def _join(self) -> SessionEvent:
        sent = self._monotonic.monotonic()
        incarnation = secrets.randbits(62) + 1
        since = self._since or self._clock.now()
        values = {
            **self._ids(incarnation),
            "roles": ",".join(self.roles),
            "metrics_url": self.metrics_url,
            "since": to_micros(since),
            "forget_us": round(FORGET_S * 1e6),
        }
        try:
            async with self._transaction() as connection:
                await connection.execute(_SHARD_ROWS, {"last": self._shards - 1})
                await connection.execute(_FORGET, values)
                await connection.execute(_JOIN, values)
                await self._notify(connection)
        except exc.ProgrammingError as error:
            if getattr(error.orig, "sqlstate", None) == _UNDEFINED_TABLE:
                raise SchemaOutdatedError(
                    "the database has no coordinator tables: migrate the store (revision 0021 or later)"
                ) from error
            raise
        return Joined(incarnation, sent)

    async def _renew(self, incarnation: int) -> SessionEvent:
        sent = self._monotonic.monotonic()  # before the statement: the database's clock reads later
        async with self._transaction() as connection:
            renewed = (await connection.execute(_RENEW, self._ids(incarnation))).scalar_one()
        return Renewed(incarnation, sent, 1 if renewed else 0)

    async def _leave(self, incarnation: int) -> None:
        async with self._transaction() as connection:
            for statement in _LEAVE:
                await connection.execute(statement, self._ids(incarnation))
            await self._notify(connection)

    async def _read(self) -> Snapshot:
        """Read the tables; wake ``wait_for_change`` when what they show moved."""
        async with self._connection() as connection:
            now_us = (await connection.execute(_READ_NOW)).scalar_one()
            members = (await connection.execute(_READ_MEMBERS)).all()
            duties = (await connection.execute(_READ_DUTIES)).all()
            shards = (await connection.execute(_READ_SHARDS)).all()
        snapshot = Snapshot.of(now_us, members, duties, shards)
        previous, self._snapshot = self._snapshot, snapshot
        self._read_at = self._monotonic.monotonic()
        if previous is None or previous.facts(self.node) != snapshot.facts(self.node):
            self._changed.set()
        return snapshot

    async def _campaign(self, incarnation: int, duty: str) -> bool:
        async with self._transaction() as connection:
            won = (await connection.execute(_CAMPAIGN, {**self._ids(incarnation), "duty": duty})).all()
            if won:
                await self._notify(connection)
        return bool(won)

    async def _resign(self, incarnation: int, duty: str) -> bool:
        async with self._transaction() as connection:
            done = (await connection.execute(_RESIGN, {"duty": duty, "incarnation": incarnation})).all()
            if done:
                await self._notify(connection)
        return bool(done)

    async def _publish(self, incarnation: int, owners: tuple[str | None, ...]) -> None:
        values = {"incarnation": incarnation, "assignment": encode_assignment(owners).decode()}
        async with self._transaction() as connection:
            if (await connection.execute(_PUBLISH, values)).all():
                await self._notify(connection)
                log.info("published the shard assignment", extra={"action": "assign", "node": self.node})

    async def _acquire(self, incarnation: int, shards: Iterable[int]) -> None:
        values = {**self._ids(incarnation), "shards": list(shards)}
        async with self._transaction() as connection:
            taken = (await connection.execute(_ACQUIRE, values)).all()
            if taken:
                await self._notify(connection)
        for row in taken:
            self._step(Acquired(incarnation, row.shard, row.epoch))

    async def _release(self, incarnation: int, epochs: Mapping[int, int]) -> None:
        values = {"incarnation": incarnation, "shards": list(epochs), "epochs": list(epochs.values())}
        async with self._transaction() as connection:
            if (await connection.execute(_RELEASE, values)).all():
                await self._notify(connection)

    # -- reconcile: decide on a fresh read, act with conditional statements

    async def _reconcile_loop(self) -> None:
        policy = retry_policy(self.ttl_s / 3)
        retries = policy.tracker()
        while True:
            now = self._monotonic.monotonic()
            await wait_for(self._dirty, poll_delay(self._snapshot, self._read_at, now, self.ttl_s / 2))
            self._dirty.clear()
            try:
                await self._reconcile()
                retries.succeeded()
            except Exception as error:
                if not policy.retries(error):
                    raise
                log.debug("reconcile failed", extra={"node": self.node, "error": str(error)})
                await asyncio.sleep(retries.failed())

    async def _reconcile(self) -> None:
        incarnation = self._session.lease
        snapshot = await self._read()
        if not incarnation:
            return
        held = self._session.held
        view = snapshot.view()
        plan = decide(
            self.node, self.roles, incarnation, view, held, self._shards, may_watch=self._may_watch()
        )
        if not plan:
            return
        await self._settle(incarnation, plan)
        if plan.assignment is not None:
            await self._publish(incarnation, plan.assignment)
        if plan.release:
            await self._release(incarnation, plan.release)
        if plan.acquire and self._session.may_acquire(self._monotonic.monotonic()):
            await self._acquire(incarnation, plan.acquire)
        if plan.acquire or plan.release:
            log.info(
                "shards rebalanced",
                extra={"action": "own", "node": self.node, "shards": len(self._session.held)},
            )

    async def _listen_loop(self) -> None:
        """Every notification (and every reconnect of the listener) calls for a fresh read; one
        from another node (or a reconnect: some may be lost) also wakes ``wait_for_change``."""
        while True:
            senders = {await self._notes.get()}
            while not self._notes.empty():
                senders.add(self._notes.get_nowait())
            self._dirty.set()
            if senders - {self.node}:
                self._changed.set()

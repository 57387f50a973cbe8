"""``PostgresCoordinator`` as a cluster, on a live PostgreSQL: shards split by the plan, the
leader replaced after a crash within the TTL, epochs that rise with every hand-over and fence
the store, and a node cut off from the database (a TCP proxy that swallows its packets) that
stops claiming before its rows expire, then rejoins. Then the pure parts, with made-up times.

Failover times are printed (``pytest -s``) and recorded as test properties."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime

import pytest
from chaos_proxy import Mode, ModeKind, Proxy
from sqlalchemy import text
from sqlalchemy.engine import make_url

from cronwheel.clock import ManualClock, SystemClock
from cronwheel.coordinator.plan import ShardKey, rendezvous
from cronwheel.coordinator.postgres import PostgresCoordinator, Snapshot, poll_delay, statement_timeout
from cronwheel.errors import BackendUnavailableError, InvalidInputError
from cronwheel.store.driver import create_engine
from cronwheel.store.sql import SchemaOutdatedError, open_store
from store.support import firing_of, make_job, make_run
from suite_stores import fresh_postgres_database

from .conftest import PG_TTL_S, PgNodeFactory
from .support import OwnershipMonitor, balanced, eventually, eventually_async, ownership

SHARDS = 256
T0 = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)

RecordProperty = Callable[[str, object], None]


async def cluster(
    start_pg_node: PgNodeFactory, count: int, hold_s: float | None = None
) -> list[PostgresCoordinator]:
    """``count`` scheduler nodes ``n1``..., once every shard is owned where rendezvous puts it."""
    nodes = [await start_pg_node(f"n{i}", hold_s=hold_s) for i in range(1, count + 1)]
    await eventually(lambda: balanced(nodes, SHARDS), 10, what=f"{count} nodes share every shard")
    return nodes


async def rows(url: str, sql: str, **values: object) -> list[tuple[object, ...]]:
    engine = create_engine(url)
    try:
        async with engine.connect() as connection:
            return [tuple(row) for row in await connection.execute(text(sql), values)]
    finally:
        await engine.dispose()


# -- several nodes --------------------------------------------------------------------------------


async def test_three_nodes_split_the_shards_by_the_plan(start_pg_node: PgNodeFactory) -> None:
    nodes = await cluster(start_pg_node, 3)
    owned = ownership(nodes)
    assert {shard: node for shard, (node, _) in owned.items()} == dict(
        enumerate(rendezvous(SHARDS, ["n1", "n2", "n3"]))
    )
    assert all(epoch > 0 for _, epoch in owned.values())
    leaders = {await node.leader() for node in nodes}
    assert len(leaders) == 1
    assert leaders <= {"n1", "n2", "n3"}
    assert [m.node for m in await nodes[0].members()] == ["n1", "n2", "n3"]


async def test_a_crashed_leader_is_replaced_and_its_shards_move_within_the_ttl(
    start_pg_node: PgNodeFactory, record_property: RecordProperty
) -> None:
    nodes = await cluster(start_pg_node, 3)
    leader = await nodes[0].leader()
    victim = next(node for node in nodes if node.node == leader)
    survivors = [node for node in nodes if node is not victim]
    before = ownership(nodes)
    lost = {shard: epoch for shard, (node, epoch) in before.items() if node == victim.node}
    async with OwnershipMonitor(list(nodes)) as monitor:
        await victim.stop(leave=False)  # a crash: its rows stay until they expire

        async def replaced() -> bool:
            return await survivors[0].leader() in {node.node for node in survivors}

        led = await eventually_async(replaced, PG_TTL_S + 1, interval_s=0.01, what="a new leader")
        took = await eventually(lambda: balanced(survivors, SHARDS), PG_TTL_S + 1, what="survivors own all")
    monitor.assert_never_doubled()
    print(f"\nafter a crash of the leader (ttl {PG_TTL_S} s): leader {led:.2f} s, shards {took:.2f} s")
    record_property("leader_failover_s", round(led, 3))
    record_property("crash_failover_s", round(took, 3))
    after = ownership(survivors)
    for shard, epoch in lost.items():
        assert after[shard][1] > epoch, "the new owner's epoch fences the old one"
    for shard, (node, epoch) in before.items():
        if shard not in lost:
            assert after[shard] == (node, epoch), "a survivor's shards stay put"


async def test_a_stopped_node_hands_over_at_once(start_pg_node: PgNodeFactory) -> None:
    nodes = await cluster(start_pg_node, 3)
    async with OwnershipMonitor(list(nodes)) as monitor:
        await nodes[2].stop()  # frees its rows and notifies
        took = await eventually(lambda: balanced(nodes[:2], SHARDS), 2, what="survivors own all")
    monitor.assert_never_doubled()
    assert took < 1.0


async def test_epochs_rise_with_every_hand_over(
    start_pg_node: PgNodeFactory, coordination_database: str
) -> None:
    first = await start_pg_node("n1")
    await eventually(lambda: len(first.owned_shards()) == SHARDS, 5, what="n1 owns all")
    seen = {shard: [lease.epoch] for shard, lease in first.owned_shards().items()}
    for name in ("n2", "n3"):
        pair = [first, await start_pg_node(name)]
        await eventually(lambda: balanced(pair, SHARDS), 5, what=f"{name} takes its share")  # noqa: B023
        joiner = pair[1]
        moved = set(joiner.owned_shards())
        assert moved
        await joiner.stop()
        await eventually(lambda: len(first.owned_shards()) == SHARDS, 5, what="back to n1")
        for shard, lease in first.owned_shards().items():
            if shard in moved:
                seen[shard].append(lease.epoch)
    assert any(len(epochs) == 3 for epochs in seen.values())
    for shard, epochs in seen.items():
        assert epochs == sorted(set(epochs)), f"shard {shard}: {epochs}"
    stored = {
        row[0]: row[1]
        for row in await rows(coordination_database, "SELECT shard, epoch FROM coordination_shards")
    }
    assert stored == {shard: lease.epoch for shard, lease in first.owned_shards().items()}


async def test_the_store_refuses_a_write_fenced_by_an_old_epoch(
    start_pg_node: PgNodeFactory, coordination_database: str
) -> None:
    store = await open_store(coordination_database)
    try:
        job = await store.create_job(make_job(next_run_at=T0))
        old = await start_pg_node("n1")
        await eventually(lambda: job.shard in old.owned_shards(), 5, what="n1 owns the job's shard")
        stale = old.owned_shards()[job.shard].epoch
        assert await store.claim_shards({job.shard: stale}, "n1", T0) == {job.shard}
        await old.stop(leave=False)
        new = await start_pg_node("n2")
        await eventually(lambda: job.shard in new.owned_shards(), PG_TTL_S + 5, what="n2 takes it")
        fresh = new.owned_shards()[job.shard].epoch
        assert fresh > stale
        assert await store.claim_shards({job.shard: fresh}, "n2", T0) == {job.shard}
        assert await store.claim_shards({job.shard: stale}, "n1", T0) == set()
        assert job.next_run_at is not None
        fenced = await store.fire([firing_of(job, make_run(job, job.next_run_at))], T0, {job.shard: stale})
        assert fenced.accepted == []
        assert fenced.fenced_job_ids == [job.id]
    finally:
        await store.close()


async def test_epochs_start_above_what_the_store_recorded(
    start_pg_node: PgNodeFactory, coordination_database: str
) -> None:
    """A cluster that moves from etcd keeps the store's epochs (etcd revisions) fencing."""
    store = await open_store(coordination_database)
    try:
        assert await store.claim_shards({5: 90_000}, "etcd-node", T0) == {5}
        node = await start_pg_node("n1")
        await eventually(lambda: 5 in node.owned_shards(), 5, what="n1 owns shard 5")
        epoch = node.owned_shards()[5].epoch
        assert epoch == 90_001
        assert await store.claim_shards({5: epoch}, "n1", T0) == {5}
    finally:
        await store.close()


async def test_an_unhealthy_node_stops_claiming_before_its_rows_expire_and_rejoins(
    start_pg_node: PgNodeFactory, record_property: RecordProperty
) -> None:
    nodes = await cluster(start_pg_node, 2, hold_s=0.0)  # (sitting out: test_session.py)
    stuck, other = nodes
    stuck_shards = set(stuck.owned_shards())
    async with OwnershipMonitor(list(nodes)) as monitor:
        healthy = False
        stuck.set_health_check(lambda: healthy)  # stops heartbeating: as if its store hung
        await eventually(lambda: not stuck.owned_shards(), PG_TTL_S, what="stuck stops claiming")
        lapsed_at = time.monotonic()
        last_renewal = stuck.session.renewed_at  # send time of the last heartbeat that got through
        assert last_renewal + PG_TTL_S - stuck.safety_margin_s <= lapsed_at < last_renewal + PG_TTL_S
        await eventually(lambda: stuck_shards <= set(other.owned_shards()), PG_TTL_S + 1.5, what="taken")
        taken_at = time.monotonic()
        assert taken_at - last_renewal >= PG_TTL_S, "the database kept the rows for the whole TTL"
        record_property("lapse_before_takeover_s", round(taken_at - lapsed_at, 3))
        healthy = True  # back: it joins again as a new incarnation and gets its share
        await eventually(lambda: balanced(nodes, SHARDS) and bool(stuck.owned_shards()), 5, what="rejoin")
    monitor.assert_never_doubled()


async def test_a_node_that_stepped_down_sits_out_while_another_serves(start_pg_node: PgNodeFactory) -> None:
    stuck, other = await cluster(start_pg_node, 2)  # hold_s: 5 TTLs by default
    healthy = False
    stuck.set_health_check(lambda: healthy)
    await eventually(lambda: len(other.owned_shards()) == SHARDS, PG_TTL_S + 3, what="other owns all")
    healthy = True  # well again, but n2 serves: n1 waits out its hold before it joins again
    await eventually(lambda: stuck.session.sitting_out, PG_TTL_S + 3, what="n1 sits out")
    await asyncio.sleep(PG_TTL_S)
    assert stuck.owned_shards() == {}
    assert stuck.incarnation == 0
    assert len(other.owned_shards()) == SHARDS


async def test_only_scheduler_members_lead_and_own_shards(start_pg_node: PgNodeFactory) -> None:
    api = await start_pg_node("api1", ("api",))
    worker = await start_pg_node("worker1", ("worker",))
    assert await api.leader() is None
    scheduler = await start_pg_node("s1", ("scheduler", "worker"))
    await eventually(lambda: len(scheduler.owned_shards()) == SHARDS, 5, what="s1 owns all")
    assert api.owned_shards() == worker.owned_shards() == {}
    assert await api.leader() == "s1"
    members = {m.node: m.roles for m in await api.members()}
    assert members == {"api1": ("api",), "worker1": ("worker",), "s1": ("scheduler", "worker")}


async def _holders(nodes: list[PostgresCoordinator]) -> set[str | None]:
    return {await node.watchdog() for node in nodes}


async def test_the_watchdog_outlives_the_schedulers(start_pg_node: PgNodeFactory) -> None:
    scheduler = await start_pg_node("s1", ("scheduler",))

    async def s1_watches() -> bool:
        return await scheduler.watchdog() == "s1" and await scheduler.leader() == "s1"

    await eventually_async(s1_watches, 5, what="s1 leads and watches")
    others = [await start_pg_node("api1", ("api",)), await start_pg_node("worker1", ("worker",))]
    assert await _holders([scheduler, *others]) == {"s1"}
    await scheduler.stop(leave=False)  # a crash

    async def taken_over() -> bool:
        holders = await _holders(others)
        return len(holders) == 1 and holders <= {"api1", "worker1"}

    await eventually_async(taken_over, PG_TTL_S + 1.5, what="api1 or worker1 holds the watchdog")
    assert await others[0].leader() is None  # no scheduler left to lead


async def test_a_watchdog_that_cannot_watch_gives_the_duty_to_one_that_can(
    start_pg_node: PgNodeFactory,
) -> None:
    first = await start_pg_node("api1", ("api",))

    async def first_watches() -> bool:
        return await first.watchdog() == "api1"

    await eventually_async(first_watches, 5, what="api1 holds the watchdog")
    second = await start_pg_node("worker1", ("worker",))
    able = False
    first.set_watchdog_check(lambda: able)

    async def moved() -> bool:
        return await _holders([first, second]) == {"worker1"}

    assert await eventually_async(moved, PG_TTL_S, what="worker1 takes the duty") < PG_TTL_S
    assert first.session.lease, "api1 gave up the duty, not its membership"
    able = True  # the duty stays where it is (no flapping back)
    await asyncio.sleep(PG_TTL_S)
    assert await _holders([first, second]) == {"worker1"}


async def test_wait_for_change_wakes_on_a_join(start_pg_node: PgNodeFactory) -> None:
    first = await start_pg_node("n1")
    await eventually(lambda: len(first.owned_shards()) == SHARDS, 5, what="n1 owns all")
    await first.wait_for_change(0.01)
    await first.wait_for_change(0.01)
    waiter = asyncio.create_task(first.wait_for_change(30))
    await asyncio.sleep(0.05)
    assert not waiter.done()
    await start_pg_node("n2")
    await asyncio.wait_for(waiter, 5)


async def test_owned_shards_follow_the_injected_clock(start_pg_node: PgNodeFactory) -> None:
    """The local deadline is measured on the coordinator's clock: a ManualClock moved past it
    empties owned_shards() at once, and the next heartbeat brings the shards back, same epochs."""
    clock = ManualClock(T0, 1000.0)
    node = await start_pg_node("n1", clock=clock)
    await eventually(lambda: len(node.owned_shards()) == SHARDS, 5, what="n1 owns all")
    before = ownership([node])
    deadline = node.session.valid_until
    assert all(lease.valid_until == deadline for lease in node.owned_shards().values())
    clock.advance(deadline - clock.monotonic() - 0.001)
    assert len(node.owned_shards()) == SHARDS
    clock.advance(0.001)
    assert node.owned_shards() == {}
    await eventually(lambda: bool(node.owned_shards()), 5, what="renewed")
    assert node.session.renewed_at == clock.monotonic()
    assert ownership([node]) == before


@pytest.fixture
async def proxy(coordination_database: str) -> AsyncIterator[Proxy]:
    url = make_url(coordination_database)
    relay = Proxy("postgres", url.host or "127.0.0.1", url.port or 5432)
    await relay.start()
    yield relay
    await relay.close()


def through(url: str, proxy: Proxy) -> str:
    return make_url(url).set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)


async def test_a_node_cut_off_from_the_database_stops_claiming_before_its_rows_expire(
    start_pg_node: PgNodeFactory, coordination_database: str, proxy: Proxy, record_property: RecordProperty
) -> None:
    cut = await start_pg_node("n1", url=through(coordination_database, proxy))
    other = await start_pg_node("n2")
    await eventually(lambda: balanced([cut, other], SHARDS), 10, what="two share every shard")
    theirs = set(cut.owned_shards())
    incarnation = cut.incarnation
    await proxy.apply(Mode(ModeKind.BLACKHOLE))  # packets vanish, no RST: a half-open connection
    began = time.monotonic()
    await eventually(lambda: not cut.owned_shards(), PG_TTL_S, interval_s=0.002, what="n1 stops claiming")
    stopped = time.monotonic()
    left = await rows(
        coordination_database,
        "SELECT count(*) FROM coordination_shards"
        " WHERE incarnation = :incarnation AND expires_at > (extract(epoch FROM clock_timestamp()) * 1e6)",
        incarnation=incarnation,
    )
    assert left == [(len(theirs),)], "every row of n1 was still unexpired when it stopped claiming"
    await eventually(lambda: theirs <= set(other.owned_shards()), PG_TTL_S + 2, what="n2 takes over")
    taken = time.monotonic()
    assert stopped < taken
    print(f"\ncut off: stopped claiming after {stopped - began:.2f} s, taken after {taken - began:.2f} s")
    record_property("cut_off_stop_s", round(stopped - began, 3))
    await proxy.apply(Mode())
    await eventually(lambda: balanced([cut, other], SHARDS), 5 * PG_TTL_S + 5, what="n1 rejoins")
    assert cut.incarnation != incarnation


async def test_start_fails_retryably_when_postgres_is_unreachable() -> None:
    coordinator = PostgresCoordinator.connect(
        "postgresql://postgres@127.0.0.1:9/none", "n1", ("scheduler",), SystemClock(), ttl_s=PG_TTL_S
    )
    with pytest.raises(BackendUnavailableError):
        await coordinator.start()


async def test_start_refuses_a_database_without_the_coordinator_tables() -> None:
    async with fresh_postgres_database(migrated=False) as url:
        coordinator = PostgresCoordinator.connect(url, "n1", ("scheduler",), SystemClock(), ttl_s=PG_TTL_S)
        with pytest.raises(SchemaOutdatedError):
            await coordinator.start()


def test_connect_refuses_what_is_not_postgresql() -> None:
    with pytest.raises(InvalidInputError):
        PostgresCoordinator.connect("sqlite:///x.db", "n1", ("scheduler",), SystemClock())


# -- pure parts -----------------------------------------------------------------------------------

NOW = 1_800_000_000_000_000  # the database's clock at the read, in microseconds
S = 1_000_000


def snapshot() -> Snapshot:
    return Snapshot.of(
        NOW,
        members=[
            ("n1", 11, "scheduler,api", NOW - 9 * S, NOW + 2 * S),
            ("n2", 12, "scheduler", NOW - 5 * S, NOW + S),
            ("w1", 13, "worker", NOW - 4 * S, NOW + 3 * S),
            ("gone", 14, "scheduler", NOW - 8 * S, NOW - 1),
        ],
        duties=[
            ("leader", "gone", 14, NOW - 1, '{"owners":["gone","n1"]}'),
            ("watchdog", "w1", 13, NOW + 3 * S, None),
        ],
        shards=[(0, "gone", 14, 7, NOW - 1), (1, "n1", 11, 3, NOW + 2 * S), (2, None, None, 4, None)],
    )


def test_a_snapshot_keeps_the_rows_that_have_not_expired_by_the_databases_clock() -> None:
    view = snapshot().view()
    assert view.members == {"n1": ("scheduler", "api"), "n2": ("scheduler",), "w1": ("worker",)}
    assert (view.leader, view.leader_lease) == (None, 0)  # expired: free for a campaign
    assert (view.watchdog, view.watchdog_lease) == ("w1", 13)
    assert view.assignment == ("gone", "n1")  # the published plan outlives its leader
    assert view.shards == {1: ShardKey("n1", 11, 3)}
    assert view.revision == NOW


def test_a_snapshot_says_who_else_schedules_since_when_and_when_its_first_lease_expires() -> None:
    assert snapshot().schedulers("n1") == {"n2": NOW - 5 * S}
    assert snapshot().expires_in_s() == 1.0
    assert Snapshot(NOW).expires_in_s() is None


def test_the_poll_comes_early_when_a_lease_it_saw_expires_first() -> None:
    read = snapshot()  # first expiry 1 s after the read
    assert poll_delay(None, 100.0, 100.0, 1.0) == 1.0
    assert poll_delay(read, 100.0, 100.0, 2.0) == pytest.approx(1.01)
    assert poll_delay(read, 100.0, 100.5, 2.0) == pytest.approx(0.51)
    assert poll_delay(read, 100.0, 103.0, 2.0) == 0.0
    assert poll_delay(read, 100.0, 100.0, 0.5) == 0.5


def test_facts_change_with_ownership_not_with_renewals_nor_with_ones_own_shards() -> None:
    renewed = Snapshot.of(
        NOW + S,
        members=[("n1", 11, "scheduler", NOW - 9 * S, NOW + 4 * S)],
        duties=[],
        shards=[(1, "n1", 11, 3, NOW + 4 * S)],
    )
    before = Snapshot.of(
        NOW,
        members=[("n1", 11, "scheduler", NOW - 9 * S, NOW + 2 * S)],
        duties=[],
        shards=[(1, "n1", 11, 3, NOW + 2 * S)],
    )
    assert renewed.facts("n2") == before.facts("n2")
    moved = Snapshot.of(NOW, [("n1", 11, "scheduler", NOW, NOW + S)], [], [(1, "n1", 11, 4, NOW + S)])
    assert moved.facts("n2") != before.facts("n2")
    assert moved.facts("n1") == before.facts("n1")  # n1's own shards: its session tells


def test_every_call_is_bounded_well_within_the_ttl() -> None:
    for ttl in (1.0, 2.0, 5.0, 30.0):
        assert statement_timeout(ttl) <= max(0.5, ttl / 3) < ttl


async def test_a_node_cut_off_from_the_database_still_stops_promptly(
    coordination_database: str, proxy: Proxy
) -> None:
    node = PostgresCoordinator.connect(
        through(coordination_database, proxy), "n1", ("scheduler",), SystemClock(), ttl_s=PG_TTL_S
    )
    await node.start()
    await eventually(lambda: len(node.owned_shards()) == SHARDS, 5, what="n1 owns all")
    await proxy.apply(Mode(ModeKind.BLACKHOLE))
    began = time.monotonic()
    await asyncio.wait_for(node.stop(), 5 * PG_TTL_S)
    assert node.owned_shards() == {}
    print(f"\nstopped in {time.monotonic() - began:.2f} s while cut off")

"""``EtcdCoordinator`` as a cluster, on a live etcd: shards shared once, fenced handover on crash,
join, lost heartbeats and an etcd restart, leader failover, watch resumption.

Failover times are printed (``pytest -s``) and recorded as test properties."""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from cronwheel.clock import ManualClock, SystemClock
from cronwheel.coordinator import Coordinator
from cronwheel.coordinator.etcd import EtcdCoordinator
from cronwheel.coordinator.etcd_api import EtcdConfig
from cronwheel.coordinator.etcd_client import EtcdClient
from cronwheel.errors import BackendUnavailableError

from .conftest import TTL_S, EtcdServer, NodeFactory, _free_port
from .support import OwnershipMonitor, balanced, eventually, eventually_async, ownership

SHARDS = 256


RecordProperty = Callable[[str, object], None]


async def cluster(
    start_node: NodeFactory,
    count: int,
    server: EtcdServer | list[EtcdServer] | None = None,
    clocks: dict[str, ManualClock] | None = None,
    hold_s: float | None = None,
) -> list[EtcdCoordinator]:
    """``count`` scheduler nodes, once every shard is owned where rendezvous hashing puts it
    (with ``clocks``: each on a ManualClock of its own, put there by name)."""
    names = [f"n{i}" for i in range(1, count + 1)]
    if clocks is not None:
        clocks.update({name: ManualClock(datetime(2026, 1, 1, tzinfo=UTC), 1000.0) for name in names})
    nodes = [
        await start_node(name, server=server, clock=clocks[name] if clocks else None, hold_s=hold_s)
        for name in names
    ]
    await eventually(lambda: balanced(nodes, SHARDS), 10, what=f"{count} nodes share every shard")
    return nodes


async def test_three_nodes_own_every_shard_exactly_once(start_node: NodeFactory) -> None:
    nodes = await cluster(start_node, 3)
    owned = ownership(nodes)
    assert sorted(owned) == list(range(SHARDS))
    counts = {node.node: len(node.owned_shards()) for node in nodes}
    assert all(40 < count < 130 for count in counts.values()), counts
    epochs = [epoch for _, epoch in owned.values()]
    assert len(set(epochs)) == SHARDS, "every acquisition is its own etcd revision"
    leaders = {await node.leader() for node in nodes}
    assert len(leaders) == 1
    assert leaders <= {"n1", "n2", "n3"}
    assert [m.node for m in await nodes[0].members()] == ["n1", "n2", "n3"]


async def test_a_crashed_nodes_shards_move_within_the_ttl(
    start_node: NodeFactory, record_property: RecordProperty
) -> None:
    nodes = await cluster(start_node, 3)
    before = ownership(nodes)
    victim = nodes[2]
    lost = {shard: epoch for shard, (node, epoch) in before.items() if node == victim.node}
    survivors = nodes[:2]
    async with OwnershipMonitor(list(nodes)) as monitor:
        await victim.stop(revoke=False)  # a crash: no goodbye, its keys stay until the lease expires
        took = await eventually(lambda: balanced(survivors, SHARDS), TTL_S + 1, what="survivors own all")
    monitor.assert_never_doubled()
    print(f"\nfailover after a crash (ttl {TTL_S} s): {took:.2f} s")
    record_property("crash_failover_s", round(took, 3))
    after = ownership(survivors)
    for shard, epoch in lost.items():
        assert after[shard][1] > epoch, "the new owner's epoch fences the old one"
    for shard, (node, epoch) in before.items():
        if shard not in lost:
            assert after[shard] == (node, epoch), "a survivor's shards stay put"


async def test_a_stopped_node_hands_over_at_once(start_node: NodeFactory) -> None:
    nodes = await cluster(start_node, 3)
    async with OwnershipMonitor(list(nodes)) as monitor:
        await nodes[2].stop()  # revokes its lease
        took = await eventually(lambda: balanced(nodes[:2], SHARDS), 2, what="survivors own all")
    monitor.assert_never_doubled()
    assert took < 1.0


async def test_a_joining_node_takes_about_a_quarter_and_no_shard_has_two_owners(
    start_node: NodeFactory,
) -> None:
    nodes = await cluster(start_node, 3)
    before = ownership(nodes)
    monitor = OwnershipMonitor(list(nodes))
    async with monitor:
        newcomer = await start_node("n4")
        monitor.nodes.append(newcomer)
        nodes.append(newcomer)
        await eventually(
            lambda: balanced(nodes, SHARDS) and len(newcomer.owned_shards()) > 0, 5, what="four share all"
        )
    monitor.assert_never_doubled()
    after = ownership(nodes)
    moved = [shard for shard in range(SHARDS) if after[shard][0] != before[shard][0]]
    assert all(after[shard][0] == "n4" for shard in moved), "shards move only to the newcomer"
    assert set(moved) == set(newcomer.owned_shards())
    assert SHARDS * 0.15 < len(moved) < SHARDS * 0.35, len(moved)
    for shard in moved:
        assert after[shard][1] > before[shard][1]
    for shard in set(range(SHARDS)) - set(moved):
        assert after[shard] == before[shard]


async def test_a_node_that_cannot_renew_stops_claiming_before_its_lease_expires(
    start_node: NodeFactory, record_property: RecordProperty
) -> None:
    nodes = await cluster(start_node, 2, hold_s=0.0)  # (sitting out: test_session.py)
    stuck, other = nodes
    stuck_shards = set(stuck.owned_shards())
    async with OwnershipMonitor(list(nodes)) as monitor:
        healthy = False
        stuck.set_health_check(lambda: healthy)  # stops heartbeating: as if partitioned or SIGSTOPped
        lapsed_after = await eventually(lambda: not stuck.owned_shards(), TTL_S, what="stuck stops claiming")
        lapsed_at = time.monotonic()
        last_renewal = stuck.session.renewed_at  # send time of the last keepalive that got through
        assert last_renewal + TTL_S - stuck.safety_margin_s <= lapsed_at < last_renewal + TTL_S
        await eventually(lambda: stuck_shards <= set(other.owned_shards()), TTL_S + 1.5, what="other takes")
        taken_at = time.monotonic()
        assert taken_at - last_renewal >= TTL_S, "etcd kept the lease for its whole TTL"
        assert taken_at > lapsed_at + 0.5
        print(f"\nstuck node stopped claiming {taken_at - lapsed_at:.2f} s before the takeover")
        record_property("lapse_before_takeover_s", round(taken_at - lapsed_at, 3))
        healthy = True  # back: it joins again with a new lease and gets its share
        await eventually(lambda: balanced(nodes, SHARDS) and bool(stuck.owned_shards()), 5, what="rejoin")
    monitor.assert_never_doubled()
    assert lapsed_after < TTL_S


async def test_the_cluster_recovers_from_an_etcd_restart(
    own_etcd: EtcdServer, start_node: NodeFactory
) -> None:
    nodes = await cluster(start_node, 3, server=own_etcd)
    before = ownership(nodes)
    async with OwnershipMonitor(list(nodes)) as monitor:
        await asyncio.to_thread(own_etcd.stop, kill=True)
        await eventually(
            lambda: all(not node.owned_shards() for node in nodes), TTL_S, what="all stop claiming"
        )
        await asyncio.to_thread(own_etcd.start)  # same data directory, same ports
        took = await eventually(lambda: balanced(nodes, SHARDS), 10, what="recovery")
    monitor.assert_never_doubled()
    print(f"\nrecovered {took:.2f} s after etcd answered again")
    members = await nodes[0].members()
    assert [m.node for m in members] == ["n1", "n2", "n3"]
    assert await nodes[0].leader() in {"n1", "n2", "n3"}
    after = ownership(nodes)
    for shard, (node, epoch) in after.items():
        old_node, old_epoch = before[shard]
        assert epoch >= old_epoch
        assert (node == old_node) or epoch > old_epoch


async def test_the_leader_fails_over(start_node: NodeFactory, record_property: RecordProperty) -> None:
    nodes = await cluster(start_node, 3)
    leader_name = await nodes[0].leader()
    leader = next(node for node in nodes if node.node == leader_name)
    rest = [node for node in nodes if node is not leader]
    began = time.monotonic()
    await leader.stop(revoke=False)

    async def new_leader() -> bool:
        return await rest[0].leader() in {node.node for node in rest}

    took = await eventually_async(new_leader, TTL_S + 1, what="a new leader")
    assert await rest[1].leader() == await rest[0].leader()
    await eventually(lambda: balanced(rest, SHARDS), TTL_S + 1, what="the new leader reassigns")
    print(f"\nleader failover: {took:.2f} s, shards reassigned {time.monotonic() - began:.2f} s")
    record_property("leader_failover_s", round(took, 3))


async def test_a_crashed_member_leaves_the_member_list_within_the_ttl(start_node: NodeFactory) -> None:
    nodes = await cluster(start_node, 2)
    await nodes[1].stop(revoke=False)

    async def gone() -> bool:
        return [m.node for m in await nodes[0].members()] == ["n1"]

    assert await eventually_async(gone, TTL_S + 1, what="n2 gone") < TTL_S + 1


async def test_only_scheduler_members_lead_and_own_shards(start_node: NodeFactory) -> None:
    api = await start_node("api1", ("api",))
    worker = await start_node("worker1", ("worker",))
    assert await api.leader() is None
    scheduler = await start_node("s1", ("scheduler", "worker"))
    await eventually(lambda: len(scheduler.owned_shards()) == SHARDS, 5, what="s1 owns all")
    assert api.owned_shards() == {}
    assert worker.owned_shards() == {}
    assert await api.leader() == "s1"
    members = {m.node: m.roles for m in await api.members()}
    assert members == {"api1": ("api",), "worker1": ("worker",), "s1": ("scheduler", "worker")}


async def _holders(nodes: list[EtcdCoordinator]) -> set[str | None]:
    return {await node.watchdog() for node in nodes}


async def test_the_watchdog_outlives_the_schedulers(
    start_node: NodeFactory, record_property: RecordProperty
) -> None:
    """The only scheduler holds both duties (it joined first); it crashes: nobody leads, but an
    api or worker node holds the watchdog within the TTL (the dead-man's switch keeps watching)."""
    scheduler = await start_node("s1", ("scheduler",))

    async def s1_watches() -> bool:
        return await scheduler.watchdog() == "s1" and await scheduler.leader() == "s1"

    await eventually_async(s1_watches, 5, what="s1 leads and watches")
    others = [await start_node("api1", ("api",)), await start_node("worker1", ("worker",))]
    assert await _holders([scheduler, *others]) == {"s1"}  # one holder, seen by every node
    began = time.monotonic()
    await scheduler.stop(revoke=False)  # a crash: its keys go when etcd expires its lease

    async def taken_over() -> bool:
        holders = await _holders(others)
        return len(holders) == 1 and holders <= {"api1", "worker1"}

    took = await eventually_async(taken_over, TTL_S + 1.5, what="api1 or worker1 holds the watchdog")
    assert await others[0].leader() is None  # no scheduler left to lead
    print(f"\nwatchdog handed over {took:.2f} s after its holder crashed (TTL {TTL_S} s)")
    record_property("watchdog_failover_s", round(took, 3))
    assert time.monotonic() - began < TTL_S + 1.5


async def test_a_watchdog_that_cannot_watch_gives_the_duty_to_one_that_can(start_node: NodeFactory) -> None:
    first = await start_node("api1", ("api",))

    async def first_watches() -> bool:
        return await first.watchdog() == "api1"

    await eventually_async(first_watches, 5, what="api1 holds the watchdog")
    second = await start_node("worker1", ("worker",))
    able = False
    first.set_watchdog_check(lambda: able)  # its notifier's passes keep failing

    async def moved() -> bool:
        return await _holders([first, second]) == {"worker1"}

    assert await eventually_async(moved, TTL_S, what="worker1 takes the duty") < TTL_S
    assert first.session.lease, "api1 gave up the duty, not its membership"
    able = True  # api1 can again: the duty stays where it is (no flapping back)
    await asyncio.sleep(TTL_S)
    assert await _holders([first, second]) == {"worker1"}


async def test_wait_for_change_wakes_on_a_rebalance(start_node: NodeFactory) -> None:
    first = await start_node("n1")
    await eventually(lambda: len(first.owned_shards()) == SHARDS, 5, what="n1 owns all")
    await first.wait_for_change(0.01)
    await first.wait_for_change(0.01)  # nothing pending any more
    waiter = asyncio.create_task(first.wait_for_change(30))
    await asyncio.sleep(0.05)
    assert not waiter.done()
    await start_node("n2")
    await asyncio.wait_for(waiter, 5)


async def test_start_fails_retryably_when_etcd_is_unreachable() -> None:
    coordinator = EtcdCoordinator.connect(
        EtcdConfig((f"http://127.0.0.1:{_free_port()}",)), "n1", ("scheduler",), SystemClock()
    )
    began = time.monotonic()
    with pytest.raises(BackendUnavailableError):
        await coordinator.start()
    assert time.monotonic() - began < 3
    await coordinator.stop()


async def test_start_takes_a_fresh_lease_when_the_first_expired_before_the_member_key(
    etcd: EtcdServer, prefix: str
) -> None:
    coordinator = EtcdCoordinator.connect(
        EtcdConfig((etcd.url,)), "n1", ("scheduler",), SystemClock(), ttl_s=TTL_S, prefix=prefix
    )
    client = coordinator._client
    grant = client.grant
    granted: list[int] = []

    async def grant_then_pause(ttl_s: int) -> tuple[int, int]:
        lease, ttl = await grant(ttl_s)
        granted.append(lease)
        if len(granted) == 1:  # the process paused past the lease's TTL before its put
            await client.revoke(lease)
        return lease, ttl

    client.grant = grant_then_pause  # type: ignore[method-assign]
    try:
        await coordinator.start()
        assert len(granted) == 2
        assert coordinator.session.lease == granted[1]
        assert [member.node for member in await coordinator.members()] == ["n1"]
    finally:
        await coordinator.stop()


async def _pause_watch(node: EtcdCoordinator) -> None:
    task = node._tasks["watch"]
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def _resume_watch(node: EtcdCoordinator) -> None:
    node._spawn("watch", node._watch_loop)


async def test_the_watch_resumes_where_it_stopped(
    start_node: NodeFactory, etcd: EtcdServer, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    first = await start_node("n1")
    await eventually(lambda: len(first.owned_shards()) == SHARDS, 5, what="n1 owns all")
    await _pause_watch(first)
    seen = first._mirror.revision
    second = await start_node("n2")
    client = EtcdClient(EtcdConfig((etcd.url,)))
    try:
        revision, _ = await client.get_prefix(prefix + "/")
        assert revision > seen
        with caplog.at_level(logging.INFO, logger="cronwheel.coordinator.etcd"):
            _resume_watch(first)
            await eventually(lambda: balanced([first, second], SHARDS), 5, what="both share")
        assert "watch cancelled" not in caplog.text

        async def exact() -> bool:
            revision, kvs = await client.get_prefix(prefix + "/")
            return first._mirror.revision == revision and first._mirror.kvs == {kv.key: kv for kv in kvs}

        await eventually_async(exact, 2, what="n1's copy is exact")
    finally:
        await client.close()


async def test_the_watch_reads_everything_again_after_a_compaction(
    start_node: NodeFactory, etcd: EtcdServer, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    first = await start_node("n1")
    await eventually(lambda: len(first.owned_shards()) == SHARDS, 5, what="n1 owns all")
    await _pause_watch(first)
    second = await start_node("n2")
    client = EtcdClient(EtcdConfig((etcd.url,)))
    try:
        for value in (b"1", b"2"):  # more history than the new member's key alone
            await client.put(f"{prefix}/unrelated", value)
        revision, _ = await client.get_prefix(prefix + "/")
        assert revision > first._mirror.revision + 1
        await client.compact(revision)
        with caplog.at_level(logging.INFO, logger="cronwheel.coordinator.etcd"):
            _resume_watch(first)
            await eventually(lambda: balanced([first, second], SHARDS), 5, what="both share")
        assert "watch cancelled by etcd" in caplog.text
        assert first._mirror.revision >= revision
    finally:
        await client.close()


def test_nodes_are_coordinators() -> None:
    coordinator: Coordinator = EtcdCoordinator.connect(
        EtcdConfig(("http://127.0.0.1:1",)), "n1", ("scheduler",), SystemClock()
    )
    assert coordinator.node == "n1"


async def test_the_cluster_recovers_when_etcd_loses_its_data(
    own_etcd: EtcdServer, start_node: NodeFactory
) -> None:
    """Leases and keys gone (a wiped etcd): every node joins again with a new lease and the
    shards are shared again. (Epochs restart with etcd's revisions: see the module docs.)"""
    nodes = await cluster(start_node, 3, server=own_etcd)
    old_leases = {node.session.lease for node in nodes}
    async with OwnershipMonitor(list(nodes)) as monitor:
        await asyncio.to_thread(own_etcd.stop, kill=True)
        shutil.rmtree(own_etcd.data_dir)
        await asyncio.to_thread(own_etcd.start)
        began = time.monotonic()
        await eventually(lambda: not {n.session.lease for n in nodes} & old_leases, 5, what="new leases")
        await eventually(lambda: balanced(nodes, SHARDS), 10, what="recovery")
        took = time.monotonic() - began
    monitor.assert_never_doubled()
    print(f"\nrecovered from a wiped etcd in {took:.2f} s")
    assert [m.node for m in await nodes[0].members()] == ["n1", "n2", "n3"]


async def test_losing_one_etcd_member_keeps_every_lease(
    own_etcd_cluster: list[EtcdServer], start_node: NodeFactory
) -> None:
    """Three etcd members, nodes given all three endpoints: the member they talk to dies, they
    move to another, and no lease is lost (same epochs, same owners)."""
    nodes = await cluster(start_node, 3, server=own_etcd_cluster)
    before = ownership(nodes)
    async with OwnershipMonitor(list(nodes)) as monitor:
        await asyncio.to_thread(own_etcd_cluster[0].stop, kill=True)
        await asyncio.sleep(TTL_S + 0.5)  # longer than a lease: it must have been renewed elsewhere
        await eventually(lambda: balanced(nodes, SHARDS), 10, what="every shard claimed again")
    monitor.assert_never_doubled()
    assert ownership(nodes) == before
    assert [m.node for m in await nodes[0].members()] == ["n1", "n2", "n3"]


async def test_leader_answers_from_what_it_saw_while_etcd_is_down(
    own_etcd: EtcdServer, start_node: NodeFactory
) -> None:
    clocks: dict[str, ManualClock] = {}
    nodes = await cluster(start_node, 2, server=own_etcd, clocks=clocks)
    leader_name = await nodes[0].leader()
    leader = next(node for node in nodes if node.node == leader_name)
    follower = next(node for node in nodes if node is not leader)
    await asyncio.to_thread(own_etcd.stop, kill=True)
    assert await follower.leader() == leader_name
    assert await leader.leader() == leader_name  # its lease is still locally valid
    assert leader.owned_shards()
    clocks[leader.node].advance(leader.ttl_s - leader.safety_margin_s)  # its local deadline
    assert not leader.owned_shards()
    assert await leader.leader() is None
    with pytest.raises(BackendUnavailableError):
        await leader.members()


async def test_owned_shards_follow_the_injected_clock(start_node: NodeFactory) -> None:
    """The local deadline is measured on the coordinator's clock: a ManualClock moved past it
    empties owned_shards() at once, and the next keepalive (sent at the clock's new time) brings
    the shards back under the same epochs."""
    clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC), 1000.0)
    node = await start_node("n1", clock=clock)
    await eventually(lambda: len(node.owned_shards()) == SHARDS, 5, what="n1 owns all")
    before = ownership([node])
    deadline = node.session.valid_until
    assert all(lease.valid_until == deadline for lease in node.owned_shards().values())
    await node.wait_for_change(0)  # forget what happened so far
    clock.advance(deadline - clock.monotonic() - 0.001)
    assert len(node.owned_shards()) == SHARDS
    clock.advance(0.001)
    assert node.owned_shards() == {}
    await asyncio.wait_for(node.wait_for_change(30), 5)  # the lapse notifies (and so does renewal)
    await eventually(lambda: bool(node.owned_shards()), 5, what="renewed")
    assert node.session.renewed_at == clock.monotonic()
    assert ownership([node]) == before

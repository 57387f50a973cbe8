"""The ``Coordinator`` contract (``cronwheel.coordinator.port``), on every backend: the embedded
``LocalCoordinator``, ``EtcdCoordinator`` on a live etcd and ``PostgresCoordinator`` on a live
PostgreSQL. What only a cluster can show (several
nodes, failover, fencing across owners) is in ``test_etcd.py`` and ``test_postgres.py``."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import pytest

from cronwheel.clock import SystemClock
from cronwheel.coordinator import Coordinator
from cronwheel.coordinator.local import LocalCoordinator

from .conftest import NodeFactory, PgNodeFactory
from .support import eventually, eventually_async

SHARDS = 32

Start = Callable[[str, tuple[str, ...]], Awaitable[Coordinator]]


def metrics_url_of(node: str) -> str:
    return f"http://127.0.0.1:9464/metrics/{node}"


@pytest.fixture(params=["local", "etcd", "postgres"])
def start(request: pytest.FixtureRequest) -> Start:
    """Starts coordinators on one backend; they are stopped at the end of the test (the local one
    holds nothing to release)."""
    if request.param == "etcd":
        start_node: NodeFactory = request.getfixturevalue("start_node")

        async def start_etcd(node: str, roles: tuple[str, ...]) -> Coordinator:
            return await start_node(node, roles, shards=SHARDS, metrics_url=metrics_url_of(node))

        return start_etcd
    if request.param == "postgres":
        start_pg_node: PgNodeFactory = request.getfixturevalue("start_pg_node")

        async def start_postgres(node: str, roles: tuple[str, ...]) -> Coordinator:
            return await start_pg_node(node, roles, shards=SHARDS, metrics_url=metrics_url_of(node))

        return start_postgres

    async def start_local(node: str, roles: tuple[str, ...]) -> Coordinator:
        coordinator = LocalCoordinator(
            node, roles, SystemClock(), shards=SHARDS, metrics_url=metrics_url_of(node)
        )
        await coordinator.start()
        return coordinator

    return start_local


async def test_a_started_node_is_a_member_with_its_roles(start: Start) -> None:
    coordinator = await start("n1", ("scheduler", "api"))
    members = await coordinator.members()
    assert [(m.node, m.roles, m.metrics_url) for m in members] == [
        ("n1", ("scheduler", "api"), metrics_url_of("n1"))
    ]
    assert members[0].since is not None
    assert members[0].last_heartbeat is not None


async def test_a_lone_scheduler_leads(start: Start) -> None:
    coordinator = await start("n1", ("scheduler",))

    async def leads() -> bool:
        return await coordinator.leader() == "n1"

    await eventually_async(leads, 5, what="n1 leads")


@pytest.mark.parametrize("roles", [("api",), ("worker",), ("scheduler",)])
async def test_a_lone_node_of_any_role_holds_the_watchdog(start: Start, roles: tuple[str, ...]) -> None:
    coordinator = await start("n1", roles)

    async def watches() -> bool:
        return await coordinator.watchdog() == "n1"

    await eventually_async(watches, 5, what="n1 holds the watchdog")
    coordinator.set_watchdog_check(lambda: True)  # accepted on every backend


async def test_a_lone_scheduler_owns_every_shard_with_a_valid_lease(start: Start) -> None:
    coordinator = await start("n1", ("scheduler",))
    await eventually(lambda: len(coordinator.owned_shards()) == SHARDS, 5, what="every shard owned")
    leases = coordinator.owned_shards()
    assert sorted(leases) == list(range(SHARDS))
    now = time.monotonic()
    for shard, lease in leases.items():
        assert lease.shard == shard
        assert isinstance(lease.epoch, int)
        assert lease.epoch > 0
        assert lease.valid_until > now


async def test_owned_shards_is_a_snapshot(start: Start) -> None:
    coordinator = await start("n1", ("scheduler",))
    await eventually(lambda: len(coordinator.owned_shards()) == SHARDS, 5, what="every shard owned")
    coordinator.owned_shards().clear()
    assert len(coordinator.owned_shards()) == SHARDS


async def test_wait_for_change_returns_by_its_timeout(start: Start) -> None:
    coordinator = await start("n1", ("scheduler",))
    await eventually(lambda: len(coordinator.owned_shards()) == SHARDS, 5, what="every shard owned")
    began = time.monotonic()
    for _ in range(3):
        await coordinator.wait_for_change(0.2)
    assert time.monotonic() - began < 1.5


async def test_stop_gives_up_every_shard(start: Start) -> None:
    coordinator = await start("n1", ("scheduler",))
    await eventually(lambda: len(coordinator.owned_shards()) == SHARDS, 5, what="every shard owned")
    await coordinator.stop()
    assert coordinator.owned_shards() == {}

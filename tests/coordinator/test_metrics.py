"""The coordinator's metrics on a live etcd and on the embedded coordinator: elections, lost
leases, and the live figures a scrape reads (shards owned, the shard count, leadership, the watchdog duty)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from cronwheel.clock import ManualClock
from cronwheel.cluster import gauges as metrics_live
from cronwheel.coordinator.etcd_api import EtcdConfig
from cronwheel.coordinator.etcd_client import EtcdClient
from cronwheel.coordinator.local import LocalCoordinator
from cronwheel.model import SHARDS
from cronwheel.telemetry import metrics

from .conftest import TTL_S, EtcdServer, NodeFactory
from .support import eventually, eventually_async


def value(name: str) -> float:
    return metrics.REGISTRY.get_sample_value(name) or 0.0


@pytest.fixture
def detached() -> Iterator[None]:
    yield
    metrics_live.LIVE.source = None


async def test_an_election_and_a_lost_lease_are_counted(
    start_node: NodeFactory, etcd: EtcdServer, detached: None
) -> None:
    elections = value("cronwheel_leader_elections_total")
    node = await start_node("n1")

    async def leads() -> bool:
        return await node.leader() == "n1"

    await eventually_async(leads, 10, what="n1 leads")
    # etcd names n1 leader as its campaign commits; n1 counts the election once that call returns
    # to it, a moment later on a loaded host (more than one if the host lapsed its lease meanwhile)
    await eventually(
        lambda: value("cronwheel_leader_elections_total") >= elections + 1, 10, what="the election counted"
    )
    await eventually(lambda: len(node.owned_shards()) == SHARDS, 10, what="n1 owns every shard")
    follower = await start_node("n2", ("worker",))
    metrics_live.attach(metrics_live.Source("n2", coordinator=follower))
    await metrics_live.LIVE.refresh(timeout_s=10)
    assert (value("cronwheel_leader"), value("cronwheel_shards_owned")) == (0.0, 0.0)
    assert value("cronwheel_watchdog") == 0.0  # n1, there first, holds it
    metrics_live.attach(metrics_live.Source("n1", coordinator=node))
    await metrics_live.LIVE.refresh(timeout_s=10)
    assert value("cronwheel_leader") == 1.0
    assert value("cronwheel_watchdog") == 1.0
    assert value("cronwheel_shards_owned") == SHARDS
    assert value("cronwheel_shards") == SHARDS

    lost = value("cronwheel_leases_lost_total")
    client = EtcdClient(EtcdConfig((etcd.url,)))
    try:
        await client.revoke(node.session.lease)  # as if etcd expired it while n1 was cut off
    finally:
        await client.close()
    await eventually(lambda: value("cronwheel_leases_lost_total") >= lost + 1, 5 * TTL_S, what="lost")
    await eventually(lambda: not node.owned_shards(), TTL_S, what="n1 dropped its shards")
    await metrics_live.LIVE.refresh(timeout_s=10)
    assert value("cronwheel_shards_owned") == 0.0


async def test_the_embedded_coordinator_leads_and_owns_everything(detached: None) -> None:
    elections = value("cronwheel_leader_elections_total")
    local = LocalCoordinator(
        "solo", ("api", "scheduler", "worker"), ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
    )
    await local.start()
    assert value("cronwheel_leader_elections_total") == elections + 1
    metrics_live.attach(metrics_live.Source("solo", coordinator=local))
    await metrics_live.LIVE.refresh(timeout_s=10)
    assert (value("cronwheel_leader"), value("cronwheel_shards_owned")) == (1.0, SHARDS)
    assert value("cronwheel_watchdog") == 1.0

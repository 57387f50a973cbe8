"""Where a node's metrics are travels in its coordinator member record (``Member.metrics_url``),
on every coordinator backend (the etcd one: ``tests/coordinator/test_contract.py`` and
``test_mirror.py``), and ``cluster status`` shows it, with the leader and the holder of the
watchdog duty."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cronwheel.cli.cluster import _render
from cronwheel.clock import SystemClock
from cronwheel.cluster.mode import Mode
from cronwheel.cluster.status import ClusterStatus, _node
from cronwheel.coordinator.local import LocalCoordinator
from cronwheel.coordinator.port import Member
from cronwheel.model import SHARDS
from cronwheel.queue.memory import MemoryQueue
from cronwheel.store.sql import open_store


async def test_the_metrics_url_travels_in_the_member_record() -> None:
    coordinator = LocalCoordinator(
        "n1", ("scheduler", "worker"), SystemClock(), metrics_url="http://h:9/metrics"
    )
    await coordinator.start()
    [member] = await coordinator.members()
    assert (member.roles, member.metrics_url) == (("scheduler", "worker"), "http://h:9/metrics")
    assert _node(member)["metrics_url"] == "http://h:9/metrics"
    assert _node(member)["roles"] == ["scheduler", "worker"]


def test_a_node_that_advertises_nothing_has_no_address() -> None:
    assert _node(Member("old", ("scheduler",)))["metrics_url"] is None


async def test_the_status_names_the_watchdog_holder(tmp_path: Path) -> None:
    clock = SystemClock()
    store = await open_store(f"sqlite:///{tmp_path / 'status.db'}", clock=clock)
    try:
        coordinator = LocalCoordinator("n1", ("api", "scheduler", "worker"), clock)
        await coordinator.start()
        data = await ClusterStatus(
            store, MemoryQueue(clock), coordinator, ("default",), Mode("sqlite", "local", "memory")
        ).snapshot()
    finally:
        await store.close()
    assert (data["leader"], data["watchdog"]) == ("n1", "n1")
    assert (data["shard_count"], data["shards"]) == (SHARDS, [])  # no lease: the one node owns all
    shown = _render(data)
    header, row = shown.splitlines()[2:4]
    assert header.split()[:4] == ["NODE", "ROLES", "LEADER", "WATCHDOG"]
    assert row.split()[:4] == ["n1", "api,scheduler,worker", "yes", "yes"]
    assert "watchdog: n1" in shown
    assert data["mode"] == {"name": "embedded", "store": "sqlite", "coordinator": "local", "queue": "memory"}
    assert shown.splitlines()[0] == "mode: embedded (store sqlite, coordinator local, queue memory)"


def test_a_cluster_without_a_watchdog_says_so() -> None:
    data: dict[str, Any] = {
        "leader": None,
        "watchdog": None,
        "nodes": [],
        "shards": [],
        "queues": [],
        "runs": {},
    }
    assert "watchdog: none (nobody watches for missed slots)" in _render(data)

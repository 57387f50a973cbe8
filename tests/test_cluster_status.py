"""Where a node's metrics are travels in its coordinator member record (``Member.metrics_url``),
on every coordinator backend (the etcd one: ``tests/coordinator/test_contract.py`` and
``test_mirror.py``), and ``cluster status`` shows it."""

from __future__ import annotations

from cronwheel.clock import SystemClock
from cronwheel.cluster import _node
from cronwheel.coordinator.local import LocalCoordinator
from cronwheel.coordinator.port import Member


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

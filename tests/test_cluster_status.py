"""Where a node's metrics are travels in its coordinator member record, beside its roles
(cronwheel.cluster); the coordinator contract keeps roles verbatim on every backend."""

from __future__ import annotations

from cronwheel.clock import SystemClock
from cronwheel.cluster import advertised_roles, read_roles
from cronwheel.coordinator.local import LocalCoordinator
from cronwheel.coordinator.port import Member


async def test_the_metrics_url_travels_beside_the_roles() -> None:
    roles = advertised_roles(("scheduler", "worker"), "http://10.0.0.7:9464/metrics")
    coordinator = LocalCoordinator("n1", roles, SystemClock())
    await coordinator.start()
    [member] = await coordinator.members()
    assert read_roles(member) == (("scheduler", "worker"), "http://10.0.0.7:9464/metrics")


def test_a_node_that_advertises_nothing_has_no_address() -> None:
    assert read_roles(Member("old", ("scheduler",))) == (("scheduler",), None)
    assert advertised_roles(("api",), None) == ("api",)

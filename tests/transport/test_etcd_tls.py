"""The coordinator over TLS and etcd's authentication at once, against a private etcd member that
serves https only to clients with a certificate of the test CA and has auth enabled with user root
(``servers.TlsEtcd``). tests/coordinator/test_secure.py covers each of the two alone, token
expiry and password changes."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator

import pytest

from cronwheel.clock import SystemClock
from cronwheel.coordinator.etcd import EtcdCoordinator
from cronwheel.coordinator.etcd_api import EtcdUnavailableError
from cronwheel.coordinator.etcd_client import EtcdClient
from cronwheel.errors import PermanentError
from cronwheel.node.backends import etcd_config, open_coordinator

from .servers import ETCD_PASSWORD, Pki, TlsEtcd, in_url


def _leaks(text: str) -> bool:
    return ETCD_PASSWORD in text or in_url(ETCD_PASSWORD) in text


@pytest.fixture
async def stopping() -> AsyncIterator[list[EtcdCoordinator]]:
    started: list[EtcdCoordinator] = []
    yield started
    for coordinator in started:
        await coordinator.stop()


async def _join(url: str, stopping: list[EtcdCoordinator], node: str) -> EtcdCoordinator:
    coordinator = EtcdCoordinator.connect(
        etcd_config(url),
        node,
        ("scheduler",),
        SystemClock(),
        ttl_s=2.0,
        shards=8,
        prefix=f"/transport/{node}",
    )
    stopping.append(coordinator)
    await coordinator.start()
    return coordinator


async def test_a_node_joins_over_tls_as_root_and_never_logs_the_password(
    tls_etcd: TlsEtcd, stopping: list[EtcdCoordinator], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG):
        node = await _join(tls_etcd.url(), stopping, "n1")
        deadline = time.monotonic() + 5
        while len(node.owned_shards()) < 8 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert len(node.owned_shards()) == 8
        assert await node.leader() == "n1"
    logged = caplog.text + "".join(repr(record.__dict__) for record in caplog.records)
    assert not _leaks(logged)


@pytest.mark.parametrize("which", ["wrong-password", "wrong-ca", "stranger-client", "named-client"])
async def test_refusals_stop_the_start_at_once_without_the_password(
    tls_etcd: TlsEtcd, pki: Pki, which: str
) -> None:
    """Through ``open_coordinator`` (what a node's start runs, with its CONNECT retries): a
    refusal is permanent, so nothing is waited for."""
    url = {
        "wrong-password": tls_etcd.url(password=ETCD_PASSWORD + "x"),
        "wrong-ca": tls_etcd.url(ca=pki.other.ca),
        "stranger-client": tls_etcd.url(client=pki.stranger),
        "named-client": tls_etcd.url(client=pki.client),  # a CommonName, which the gateway refuses
    }[which]
    began = time.monotonic()
    with pytest.raises(PermanentError) as refused:
        await open_coordinator(url, "n2", ("scheduler",), SystemClock(), 2.0)  # a start cleans up
    assert time.monotonic() - began < 5
    assert not _leaks(str(refused.value))
    if which == "named-client":
        assert "issue cronwheel's without one" in str(refused.value)


async def test_a_plain_client_to_the_https_port_looks_like_an_outage(tls_etcd: TlsEtcd) -> None:
    """etcd closes the connection without an answer: waited for as an outage (docs/security.md)."""
    client = EtcdClient(etcd_config(f"etcd://root:{in_url(ETCD_PASSWORD)}@{tls_etcd.address}"))
    try:
        with pytest.raises(EtcdUnavailableError) as unavailable:
            await client.range("/x")
    finally:
        await client.close()
    assert not _leaks(str(unavailable.value))

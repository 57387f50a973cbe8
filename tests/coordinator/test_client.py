"""The JSON-gateway client against a live etcd: the semantics the coordinator relies on."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from cronwheel.coordinator.etcd_api import (
    Code,
    EtcdConfig,
    EtcdRequestError,
    EtcdUnavailableError,
    LeaseNotFoundError,
    WatchBatch,
    cmp_create,
    cmp_lease,
    op_delete,
    op_get,
    op_put,
    prefix_end,
)
from cronwheel.coordinator.etcd_client import EtcdClient

from .conftest import EtcdServer, _free_port


@pytest.fixture
async def client(etcd: EtcdServer) -> AsyncIterator[EtcdClient]:
    client = EtcdClient(EtcdConfig((etcd.url,)))
    yield client
    await client.close()


async def batches(client: EtcdClient, prefix: str, start: int, count: int) -> list[WatchBatch]:
    found: list[WatchBatch] = []
    stream = client.watch(prefix, prefix_end(prefix), start)
    async with contextlib.aclosing(stream):
        async with asyncio.timeout(5):
            async for batch in stream:
                found.append(batch)
                if sum(len(b.events) for b in found) >= count or batch.canceled:
                    break
    return found


async def test_create_if_absent_succeeds_once_and_its_revision_is_the_create_revision(
    client: EtcdClient, prefix: str
) -> None:
    lease, _ = await client.grant(5)
    key = f"{prefix}/shard"
    first = await client.txn([cmp_create(key, 0)], [op_put(key, b"a", lease)], [op_get(key)])
    second = await client.txn([cmp_create(key, 0)], [op_put(key, b"b", lease)], [op_get(key)])
    assert first.succeeded
    assert not second.succeeded
    [kv] = second.ranged()
    assert (kv.value, kv.create_revision, kv.mod_revision, kv.lease) == (
        b"a",
        first.revision,
        first.revision,
        lease,
    )
    assert (await client.txn([cmp_lease(key, lease)], [op_delete(key)])).succeeded
    third = await client.txn([cmp_create(key, 0)], [op_put(key, b"c", lease)])
    assert third.succeeded
    assert third.revision > first.revision
    await client.revoke(lease)


async def test_keys_on_a_revoked_lease_are_gone_and_the_lease_is_unknown(
    client: EtcdClient, prefix: str
) -> None:
    lease, granted = await client.grant(5)
    assert granted >= 5
    await client.put(f"{prefix}/k", b"v", lease)
    assert await client.keepalive(lease) >= 5
    await client.revoke(lease)
    assert (await client.range(f"{prefix}/k"))[1] == []
    assert await client.keepalive(lease) == 0
    with pytest.raises(LeaseNotFoundError) as raised:
        await client.put(f"{prefix}/k", b"v", lease)
    assert raised.value.code == Code.NOT_FOUND
    await client.revoke(lease)  # twice is fine


async def test_a_watch_from_a_revision_replays_exactly_what_followed_it(
    client: EtcdClient, prefix: str
) -> None:
    revisions = [await client.put(f"{prefix}/k{i}", str(i).encode()) for i in range(5)]
    result = await client.txn([], [op_delete(f"{prefix}/k0"), op_delete(f"{prefix}/k1")])
    found = await batches(client, prefix + "/", revisions[2], 5)
    events = [event for batch in found for event in batch.events]
    assert [(e.type, e.kv.key, e.kv.mod_revision) for e in events] == [
        ("PUT", f"{prefix}/k2", revisions[2]),
        ("PUT", f"{prefix}/k3", revisions[3]),
        ("PUT", f"{prefix}/k4", revisions[4]),
        ("DELETE", f"{prefix}/k0", result.revision),
        ("DELETE", f"{prefix}/k1", result.revision),
    ]
    both = [batch for batch in found if any(e.type == "DELETE" for e in batch.events)]
    assert len(both) == 1, "the events of one revision come in one batch"


async def test_a_watch_from_a_compacted_revision_is_cancelled(client: EtcdClient, prefix: str) -> None:
    first = await client.put(f"{prefix}/k", b"1")
    await client.put(f"{prefix}/k", b"2")
    last = await client.put(f"{prefix}/k", b"3")
    await client.compact(last)
    found = await batches(client, prefix + "/", first + 1, 1)
    assert found[-1].canceled
    assert found[-1].compact_revision == last


async def test_refusals_are_permanent_errors_with_etcds_code(client: EtcdClient, prefix: str) -> None:
    with pytest.raises(EtcdRequestError) as raised:
        await client.grant(10**12)  # "too large lease TTL"
    assert (raised.value.code, raised.value.retryable) == (Code.OUT_OF_RANGE, False)
    key = f"{prefix}/twice"
    with pytest.raises(EtcdRequestError) as raised:
        await client.txn([], [op_put(key, b"a"), op_put(key, b"b")])  # "duplicate key given in txn"
    assert raised.value.code == Code.INVALID_ARGUMENT
    assert not isinstance(raised.value, LeaseNotFoundError)


async def test_an_unreachable_etcd_is_a_retryable_error() -> None:
    client = EtcdClient(EtcdConfig((f"http://127.0.0.1:{_free_port()}",)), request_timeout_s=1)
    try:
        with pytest.raises(EtcdUnavailableError) as raised:
            await client.range("/x")
        assert raised.value.retryable
    finally:
        await client.close()

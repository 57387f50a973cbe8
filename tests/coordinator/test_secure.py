"""etcd over TLS and with credentials, on live etcd servers: an etcd that serves https only to
clients with a certificate of a CA the test makes, and an etcd with authentication enabled
(``--auth-token simple``, user root with a password). The coordinator URL forms are those of
``cronwheel.node.backends.etcd_config`` (docs/cluster.md)."""

from __future__ import annotations

import json
import logging
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from cronwheel.clock import SystemClock
from cronwheel.coordinator.etcd import CoordinatorFailedError, EtcdCoordinator
from cronwheel.coordinator.etcd_api import Code, EtcdAuthError, EtcdConfig, EtcdRequestError
from cronwheel.coordinator.etcd_client import EtcdClient
from cronwheel.errors import PermanentError
from cronwheel.node.backends import etcd_config

from .conftest import TTL_S, EtcdServer, Tls, etcd_binary
from .support import balanced, eventually

SHARDS = 16
PASSWORD = "s3cr3t p@ss:wörd"
PASSWORD_IN_URL = "s3cr3t%20p%40ss%3Aw%C3%B6rd"


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Tls:
    return Tls.generate(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def tls_etcd(tmp_path_factory: pytest.TempPathFactory, tls: Tls) -> Iterator[EtcdServer]:
    server = EtcdServer(etcd_binary(), tmp_path_factory.mktemp("etcd-tls"), tls=tls)
    server.start()
    yield server
    server.stop()


def _admin(
    server: EtcdServer, path: str, body: dict[str, object], token: str | None = None
) -> dict[str, str]:
    """One call of etcd's gateway outside cronwheel's client (as an operator's etcdctl would)."""
    request = urllib.request.Request(
        f"{server.url}/v3/{path}", json.dumps(body).encode(), {"Authorization": token} if token else {}
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        answer: dict[str, str] = json.loads(response.read())
    assert "error" not in answer, answer
    return answer


def _root_token(server: EtcdServer, password: str = PASSWORD) -> str:
    return _admin(server, "auth/authenticate", {"name": "root", "password": password})["token"]


def _set_password(server: EtcdServer, password: str) -> None:
    """What an operator rotating the password does; etcd drops the user's tokens with it."""
    _admin(server, "auth/user/changepw", {"name": "root", "password": password}, _root_token(server))


@pytest.fixture
def auth_etcd(tmp_path: Path) -> Iterator[EtcdServer]:
    server = EtcdServer(etcd_binary(), tmp_path / "etcd", args=["--auth-token=simple"])
    server.start()
    _admin(server, "auth/user/add", {"name": "root", "password": PASSWORD})
    _admin(server, "auth/user/grant", {"user": "root", "role": "root"})
    _admin(server, "auth/enable", {})
    yield server
    server.stop()


@pytest.fixture
async def stopping() -> AsyncIterator[list[EtcdCoordinator]]:
    started: list[EtcdCoordinator] = []
    yield started
    for coordinator in started:
        await coordinator.stop()


async def start(url: str, stopping: list[EtcdCoordinator], node: str = "n1") -> EtcdCoordinator:
    coordinator = EtcdCoordinator.connect(
        etcd_config(url), node, ("scheduler",), SystemClock(), ttl_s=TTL_S, shards=SHARDS, prefix="/secure"
    )
    stopping.append(coordinator)
    await coordinator.start()
    return coordinator


# -- TLS ------------------------------------------------------------------------------------------


async def test_a_coordinator_joins_over_tls_with_a_client_certificate(
    tls_etcd: EtcdServer, tls: Tls, stopping: list[EtcdCoordinator]
) -> None:
    url = f"etcd+https://{tls_etcd.address}?cacert={tls.ca}&cert={tls.client_cert}&key={tls.client_key}"
    node = await start(url, stopping)
    await eventually(lambda: len(node.owned_shards()) == SHARDS, 5, what="n1 owns every shard over TLS")
    assert [member.node for member in await node.members()] == ["n1"]


async def test_a_server_certificate_that_does_not_verify_is_refused_at_once(
    tls_etcd: EtcdServer, tls: Tls, stopping: list[EtcdCoordinator]
) -> None:
    """Without the test CA (the system's trust store does not know it), nothing is retried:
    a certificate does not start to verify by waiting."""
    began = time.monotonic()
    with pytest.raises(EtcdAuthError, match="does not verify"):
        await start(f"etcd+https://{tls_etcd.address}?cert={tls.client_cert}&key={tls.client_key}", stopping)
    assert time.monotonic() - began < 2


# -- credentials -----------------------------------------------------------------------------------


async def test_a_coordinator_authenticates_and_never_logs_the_password_or_token(
    auth_etcd: EtcdServer, stopping: list[EtcdCoordinator], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG):
        node = await start(f"etcd://root:{PASSWORD_IN_URL}@{auth_etcd.address}", stopping)
        await eventually(lambda: len(node.owned_shards()) == SHARDS, 5, what="n1 owns every shard")
        assert await node.leader() == "n1"
        token = node._client._token  # type: ignore[attr-defined]
        assert token
    logged = caplog.text + "".join(repr(record.__dict__) for record in caplog.records)
    assert PASSWORD not in logged
    assert PASSWORD_IN_URL not in logged
    assert token not in logged
    assert PASSWORD not in repr(etcd_config(f"etcd://root:{PASSWORD_IN_URL}@{auth_etcd.address}"))


async def test_without_credentials_an_auth_etcd_refuses_permanently(auth_etcd: EtcdServer) -> None:
    client = EtcdClient(EtcdConfig((auth_etcd.url,)))
    try:
        with pytest.raises(EtcdRequestError) as raised:
            await client.range("/x")
        assert raised.value.code == Code.INVALID_ARGUMENT  # "user name is empty"
        assert not raised.value.retryable
    finally:
        await client.close()


async def test_a_wrong_password_is_refused_at_once_without_saying_it(
    auth_etcd: EtcdServer, stopping: list[EtcdCoordinator]
) -> None:
    began = time.monotonic()
    with pytest.raises(EtcdAuthError, match="credentials of user 'root'") as raised:
        await start(f"etcd://root:wrong-secret@{auth_etcd.address}", stopping)
    assert isinstance(raised.value, PermanentError)
    assert "wrong-secret" not in str(raised.value)
    assert time.monotonic() - began < 2


async def test_a_token_etcd_dropped_is_replaced_and_the_lease_kept(
    auth_etcd: EtcdServer, stopping: list[EtcdCoordinator]
) -> None:
    """etcd 3.4 checks tokens on KV calls, not on keepalives: a dropped token shows on the next
    read or transaction, which authenticates again and goes on."""
    url = f"etcd://root:{PASSWORD_IN_URL}@{auth_etcd.address}"
    first = await start(url, stopping)
    await eventually(lambda: len(first.owned_shards()) == SHARDS, 5, what="n1 owns every shard")
    lease = first.session.lease
    client: EtcdClient = first._client  # type: ignore[assignment]
    old_token = client._token
    _set_password(auth_etcd, PASSWORD)  # the same password: only the tokens go
    assert await first.leader() == "n1"
    assert client._token not in (None, old_token)
    second = await start(url, stopping, "n2")  # n1 releases shards: transactions, with the new token
    await eventually(lambda: balanced([first, second], SHARDS), 5, what="n1 and n2 share")
    assert first.session.lease == lease


async def test_credentials_etcd_no_longer_accepts_stop_the_coordinator(
    auth_etcd: EtcdServer, stopping: list[EtcdCoordinator], caplog: pytest.LogCaptureFixture
) -> None:
    """A permanent error stops it (the supervision rule): it stops claiming and renewing, and
    its calls raise, which stops a scheduler process."""
    first = await start(f"etcd://root:{PASSWORD_IN_URL}@{auth_etcd.address}", stopping)
    await eventually(lambda: len(first.owned_shards()) == SHARDS, 5, what="n1 owns every shard")
    with caplog.at_level(logging.INFO, logger="cronwheel.coordinator.etcd"):
        _set_password(auth_etcd, "rotated-elsewhere")
        await start(f"etcd://root:rotated-elsewhere@{auth_etcd.address}", stopping, "n2")

        def failed() -> bool:  # n1's next transaction finds its token gone, and its password
            try:
                first.owned_shards()
            except CoordinatorFailedError:
                return True
            return False

        await eventually(failed, 5, what="n1 stops")
    with pytest.raises(CoordinatorFailedError, match="credentials of user 'root'"):
        await first.leader()
    with pytest.raises(CoordinatorFailedError):
        await first.wait_for_change(0)
    assert [record for record in caplog.records if getattr(record, "action", "") == "fail"]
    assert "rotated-elsewhere" not in caplog.text

"""Private TLS-only backends for the transport tests, each started once per session (see
``servers.py``) and stopped at its end."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from .servers import Pki, TlsEtcd, TlsPostgres, TlsRedis


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="session")
def tls_redis(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[TlsRedis]:
    server = TlsRedis(tmp_path_factory.mktemp("redis"), pki)
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def tls_postgres(pki: Pki) -> Iterator[TlsPostgres]:
    server = TlsPostgres(pki)
    try:
        server.start()
        asyncio.run(server.create_users())
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def tls_etcd(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[TlsEtcd]:
    server = TlsEtcd(tmp_path_factory.mktemp("etcd"), pki)
    try:
        server.start()
        yield server
    finally:
        server.stop()

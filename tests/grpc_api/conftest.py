"""A gRPC API server on 127.0.0.1 (an ephemeral port) over a real SqlStore (a tmp SQLite file),
a manual clock and the API tests' recording queue, and clients that use only the generated
stubs of ``cronwheel.v1`` (as a client in another language would). ``Env.rest()`` is a REST
client of the same services (the app built from them), for what REST and gRPC share."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import httpx
import pytest

from api.conftest import START, issue_token
from api.doubles import RecordingQueue
from cronwheel.api.app import AccessPolicy, ApiServices, create_app
from cronwheel.auth.identity import Scope
from cronwheel.clock import ManualClock
from cronwheel.grpc_api import GrpcServer, grpc_server
from cronwheel.jobs.service import ChangeFeed, JobService, TargetPolicy
from cronwheel.secrets.crypto import Keyring, new_key
from cronwheel.secrets.service import SecretService
from cronwheel.store.sql import SqlStore, open_store
from cronwheel.v1 import jobs_pb2_grpc, runs_pb2_grpc, secrets_pb2_grpc, tokens_pb2_grpc
from suite_stores import fresh_sqlite_database


@dataclass
class Env:
    store: SqlStore
    clock: ManualClock
    queue: RecordingQueue
    server: GrpcServer
    admin_token: str
    services: ApiServices

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.server.port}"

    def channel(self) -> grpc.aio.Channel:
        return grpc.aio.insecure_channel(self.target)

    def rest(self, token: str | None = None) -> httpx.AsyncClient:
        """A REST client (as from 127.0.0.1) of an app built from the gRPC server's services."""
        transport = httpx.ASGITransport(app=create_app(self.services), client=("127.0.0.1", 40000))
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        return httpx.AsyncClient(transport=transport, base_url="http://localhost", headers=headers)


def auth(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


@dataclass
class Stubs:
    jobs: jobs_pb2_grpc.JobServiceAsyncStub
    runs: runs_pb2_grpc.RunServiceAsyncStub
    tokens: tokens_pb2_grpc.TokenServiceAsyncStub
    secrets: secrets_pb2_grpc.SecretServiceAsyncStub


def keyring() -> Keyring:
    return Keyring([new_key("k1")])


@pytest.fixture
async def env(tmp_path: Path, store_templates: Path) -> AsyncIterator[Env]:
    clock = ManualClock(START)
    # a copy of the worker's migrated database (tests/conftest.py)
    store = await open_store(fresh_sqlite_database(store_templates, tmp_path / "cronwheel.db"), clock=clock)
    queue = RecordingQueue()
    service = JobService(
        store, queue, ChangeFeed(), clock, TargetPolicy(allow_commands=False, python_allow=("myapp.*",))
    )
    secrets = SecretService(store, keyring(), clock)
    services = ApiServices(store, service, clock, access=AccessPolicy(), secrets=secrets)
    server = await grpc_server(services, "127.0.0.1", 0)
    try:
        admin = await issue_token(store, Scope.ADMIN, name="test-admin")
        await secrets.set("data", "hook-token", "s3cret")  # what the jobs of spec() refer to
        yield Env(store, clock, queue, server, admin, services)
    finally:
        await server.server.stop(None)
        await store.close()


@pytest.fixture
async def channel(env: Env) -> AsyncIterator[grpc.aio.Channel]:
    async with env.channel() as opened:
        yield opened


@pytest.fixture
def stubs(channel: grpc.aio.Channel) -> Stubs:
    return Stubs(
        jobs_pb2_grpc.JobServiceStub(channel),
        runs_pb2_grpc.RunServiceStub(channel),
        tokens_pb2_grpc.TokenServiceStub(channel),
        secrets_pb2_grpc.SecretServiceStub(channel),
    )

"""GrpcExecutor against a live grpc.aio server on 127.0.0.1 (tests/grpc_echo.py), with server
reflection or without it. Addresses other than loopback are refused before any connection, so
they are safe to name here (10.0.0.1 and a name an injected resolver answers with it)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import pytest

from cronwheel.clock import ManualClock
from cronwheel.model import GrpcTarget, Outcome, RetryPolicy, SecretRef
from cronwheel.secrets.crypto import Keyring, new_key, seal
from cronwheel.secrets.resolve import SecretResolver
from cronwheel.store.port import StoredSecret
from cronwheel.store.sql import SqlStore
from cronwheel.worker.executors import AttemptContext, Executors, WorkerSettings
from cronwheel.worker.executors.grpc import STATUS_OUTCOMES, GrpcExecutor
from cronwheel.worker.retry import should_retry
from grpc_echo import SAY, WATCH, EchoServer, descriptor_set

NOW = datetime(2026, 3, 2, 12, 0, 5, tzinfo=UTC)
SLOT = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
LOOPBACK = WorkerSettings(allowed_networks=("127.0.0.0/8",), grpc_idle_s=60.0)


def make_ctx(**changes: Any) -> AttemptContext:
    ctx = AttemptContext(
        execution_id="0193f2a4-run-0001",
        job_id="job-42",
        job_name="nightly",
        team="payments",
        scheduled_at=SLOT,
        attempt=2,
        timeout_s=5.0,
        payload={"name": "ada", "count": 21, "tags": ["a", "b"], "at": "2026-03-02T12:00:00Z"},
    )
    return replace(ctx, **changes)


@pytest.fixture
async def server() -> AsyncIterator[EchoServer]:
    started = await EchoServer().start()
    yield started
    await started.stop()


@pytest.fixture
async def bare() -> AsyncIterator[EchoServer]:
    """A server without reflection."""
    started = await EchoServer(reflection=False).start()
    yield started
    await started.stop()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
async def executor(clock: ManualClock) -> AsyncIterator[GrpcExecutor]:
    built = GrpcExecutor(LOOPBACK, clock=clock)
    yield built
    await built.close()


# -- the call ----------------------------------------------------------------------------------------


async def test_the_payload_becomes_the_request_and_the_response_is_kept_as_json(
    server: EchoServer, executor: GrpcExecutor
) -> None:
    result = await executor.execute(GrpcTarget(server.address, SAY), make_ctx())
    assert result.outcome is Outcome.SUCCESS, result.error
    [call] = server.calls
    assert call.request == {"name": "ada", "count": 21, "tags": ["a", "b"], "at": "2026-03-02T12:00:00Z"}
    assert result.output == '{"greeting": "hello ada", "count": 42, "at": "2026-03-02T12:00:00Z"}'
    assert result.output_tail is None
    assert not result.final


async def test_every_call_carries_the_execution_id_job_slot_and_attempt_in_metadata(
    server: EchoServer, executor: GrpcExecutor
) -> None:
    target = GrpcTarget(server.address, SAY, metadata=(("x-team", "blue"), ("idempotency-key", "spoofed")))
    result = await executor.execute(target, make_ctx(trace_headers=(("traceparent", "00-ab-cd-01"),)))
    assert result.outcome is Outcome.SUCCESS, result.error
    [call] = server.calls
    assert call.metadata["idempotency-key"] == "0193f2a4-run-0001"  # ours win a clash
    assert call.metadata["x-cronwheel-job-id"] == "job-42"
    assert call.metadata["x-cronwheel-scheduled-at"] == "2026-03-02T12:00:00Z"
    assert call.metadata["x-cronwheel-attempt"] == "2"
    assert call.metadata["x-team"] == "blue"
    assert call.metadata["traceparent"] == "00-ab-cd-01"


async def test_no_payload_sends_an_empty_request(server: EchoServer, executor: GrpcExecutor) -> None:
    result = await executor.execute(GrpcTarget(server.address, SAY), make_ctx(payload=None))
    assert result.outcome is Outcome.SUCCESS, result.error
    assert server.calls[0].request == {}
    assert result.output == '{"greeting": "hello "}'


async def test_a_long_response_is_bounded_like_an_http_body(server: EchoServer, clock: ManualClock) -> None:
    executor = GrpcExecutor(replace(LOOPBACK, output_limit=20, output_tail_bytes=40), clock=clock)
    try:
        result = await executor.execute(
            GrpcTarget(server.address, SAY), make_ctx(payload={"name": "x" * 100})
        )
    finally:
        await executor.close()
    assert result.outcome is Outcome.SUCCESS
    assert result.output == '{"greeting": "hello '
    assert result.output_tail is not None
    assert len(result.output_tail) == 40


@pytest.mark.parametrize(
    ("payload", "named"),
    [
        ({"name": "ada", "bogus": 1}, '"bogus"'),
        ({"count": "many"}, "count"),
        ({"tags": "not-a-list"}, "tags"),
    ],
)
async def test_a_payload_that_does_not_convert_is_a_final_failure_naming_the_field(
    server: EchoServer, executor: GrpcExecutor, payload: dict[str, Any], named: str
) -> None:
    result = await executor.execute(GrpcTarget(server.address, SAY), make_ctx(payload=payload))
    assert result.outcome is Outcome.FAILURE
    assert result.final
    assert result.error is not None
    assert "cwtest.Req" in result.error
    assert named in result.error
    assert server.calls == []  # nothing was called


async def test_a_payload_that_is_not_an_object_is_a_final_failure(
    server: EchoServer, executor: GrpcExecutor
) -> None:
    result = await executor.execute(GrpcTarget(server.address, SAY), make_ctx(payload=[1, 2]))
    assert result.outcome is Outcome.FAILURE
    assert result.final
    assert result.error == "the payload must be a JSON object: it becomes the request message cwtest.Req"


async def test_the_attempts_budget_is_the_deadline(server: EchoServer, executor: GrpcExecutor) -> None:
    result = await executor.execute(
        GrpcTarget(server.address, SAY), make_ctx(payload={"name": "sleep:5"}, timeout_s=0.3)
    )
    assert result.outcome is Outcome.TIMEOUT
    assert not result.final


async def test_a_deadline_already_passed_calls_nothing(server: EchoServer, executor: GrpcExecutor) -> None:
    result = await executor.execute(
        GrpcTarget(server.address, SAY), make_ctx(deadline=NOW - timedelta(seconds=1))
    )
    assert result.outcome is Outcome.TIMEOUT
    assert server.calls == []
    assert server.methods == []


RETRYABLE = ["UNAVAILABLE", "RESOURCE_EXHAUSTED", "ABORTED", "INTERNAL", "UNKNOWN"]
FINAL = [
    "INVALID_ARGUMENT",
    "NOT_FOUND",
    "PERMISSION_DENIED",
    "UNAUTHENTICATED",
    "UNIMPLEMENTED",
    "FAILED_PRECONDITION",
]


@pytest.mark.parametrize("status", RETRYABLE + FINAL + ["DEADLINE_EXCEEDED"])
async def test_each_status_maps_to_an_outcome_retried_or_final(
    server: EchoServer, executor: GrpcExecutor, status: str
) -> None:
    result = await executor.execute(
        GrpcTarget(server.address, SAY), make_ctx(payload={"name": f"status:{status}"})
    )
    assert result.error == f"grpc status {status}: told to (status:{status})"
    assert result.final is (status in FINAL)
    expected = {"DEADLINE_EXCEEDED": Outcome.TIMEOUT, "UNAVAILABLE": Outcome.ERROR}.get(
        status, Outcome.FAILURE
    )
    assert result.outcome is expected
    policy = RetryPolicy(max_attempts=5)
    assert should_retry(policy, 1, result.outcome, result.final) is (status not in FINAL)


def test_the_status_table_covers_every_code_but_ok() -> None:
    assert set(STATUS_OUTCOMES) == set(grpc.StatusCode) - {grpc.StatusCode.OK}


async def test_nothing_listening_is_an_error_that_is_retried(executor: GrpcExecutor) -> None:
    result = await executor.execute(GrpcTarget("127.0.0.1:1", SAY), make_ctx(timeout_s=3.0))
    assert result.outcome is Outcome.ERROR
    assert result.error is not None
    assert result.error.startswith("grpc status UNAVAILABLE")
    assert not result.final


async def test_a_streaming_method_is_refused_finally(server: EchoServer, executor: GrpcExecutor) -> None:
    result = await executor.execute(GrpcTarget(server.address, WATCH), make_ctx())
    assert result.outcome is Outcome.FAILURE
    assert result.final
    assert result.error == "cwtest.Echo/Watch is a streaming method; only unary methods are called"


async def test_a_method_reflection_does_not_know_is_a_final_failure(
    server: EchoServer, executor: GrpcExecutor
) -> None:
    unknown = await executor.execute(GrpcTarget(server.address, "cwtest.Nope/Say"), make_ctx())
    assert unknown.outcome is Outcome.FAILURE
    assert unknown.final
    assert unknown.error is not None
    assert "does not know cwtest.Nope" in unknown.error
    missing = await executor.execute(GrpcTarget(server.address, "cwtest.Echo/Shout"), make_ctx())
    assert missing.final
    assert missing.error == "the target's server reflection does not define the method cwtest.Echo/Shout"


# -- descriptors: reflection, its cache, a job's descriptor set --------------------------------------


def reflections(server: EchoServer) -> int:
    return sum(1 for method in server.methods if "ServerReflection" in method)


async def test_reflection_is_cached_for_its_ttl(server: EchoServer, clock: ManualClock) -> None:
    executor = GrpcExecutor(replace(LOOPBACK, grpc_descriptor_ttl_s=300, grpc_idle_s=3600), clock=clock)
    try:
        for _ in range(3):
            assert (
                await executor.execute(GrpcTarget(server.address, SAY), make_ctx())
            ).outcome is Outcome.SUCCESS
        assert reflections(server) == 1
        clock.advance(301)
        assert (
            await executor.execute(GrpcTarget(server.address, SAY), make_ctx())
        ).outcome is Outcome.SUCCESS
        assert reflections(server) == 2
    finally:
        await executor.close()


async def test_a_payload_that_does_not_convert_with_cached_descriptors_asks_again(
    server: EchoServer, executor: GrpcExecutor
) -> None:
    """The service may have gained the field since: the descriptors are fetched again first."""
    assert (await executor.execute(GrpcTarget(server.address, SAY), make_ctx())).outcome is Outcome.SUCCESS
    result = await executor.execute(GrpcTarget(server.address, SAY), make_ctx(payload={"color": "red"}))
    assert result.final
    assert result.error is not None
    assert '"color"' in result.error
    assert reflections(server) == 2


async def test_unimplemented_drops_the_cached_descriptors_and_other_statuses_keep_them(
    server: EchoServer, executor: GrpcExecutor
) -> None:
    target = GrpcTarget(server.address, SAY)
    for name in ("ada", "status:INTERNAL", "status:NOT_FOUND", "ada"):
        await executor.execute(target, make_ctx(payload={"name": name}))
    assert reflections(server) == 1
    await executor.execute(target, make_ctx(payload={"name": "status:UNIMPLEMENTED"}))
    assert (await executor.execute(target, make_ctx())).outcome is Outcome.SUCCESS
    assert reflections(server) == 2  # the method may have moved: asked again


async def test_the_descriptor_cache_is_bounded(server: EchoServer, clock: ManualClock) -> None:
    executor = GrpcExecutor(replace(LOOPBACK, grpc_descriptor_entries=1), clock=clock)
    other = await EchoServer().start()
    try:
        for address in (server.address, other.address, server.address):
            assert (await executor.execute(GrpcTarget(address, SAY), make_ctx())).outcome is Outcome.SUCCESS
        assert reflections(server) == 2  # evicted by the other's entry, so asked again
    finally:
        await executor.close()
        await other.stop()


async def test_a_descriptor_set_needs_no_reflection(bare: EchoServer, executor: GrpcExecutor) -> None:
    target = GrpcTarget(bare.address, SAY, descriptor_set=descriptor_set())
    result = await executor.execute(target, make_ctx())
    assert result.outcome is Outcome.SUCCESS, result.error
    assert result.output == '{"greeting": "hello ada", "count": 42, "at": "2026-03-02T12:00:00Z"}'
    assert bare.methods == ["/cwtest.Echo/Say"]  # no reflection call
    # the well-known types may be left out: protobuf has them
    lean = replace(target, descriptor_set=descriptor_set(include_imports=False))
    assert (await executor.execute(lean, make_ctx())).outcome is Outcome.SUCCESS


async def test_without_reflection_or_a_descriptor_set_the_failure_says_what_to_do(
    bare: EchoServer, executor: GrpcExecutor
) -> None:
    result = await executor.execute(GrpcTarget(bare.address, SAY), make_ctx())
    assert result.outcome is Outcome.FAILURE
    assert result.final
    assert result.error == (
        "the target has no server reflection (grpc status UNIMPLEMENTED): "
        "give the job a descriptor_set defining the method"
    )


# -- the SSRF guard ------------------------------------------------------------------------------------


async def test_a_private_address_is_refused_without_connecting(clock: ManualClock) -> None:
    executor = GrpcExecutor(WorkerSettings(), clock=clock)
    try:
        result = await executor.execute(GrpcTarget("10.0.0.1:50051", SAY), make_ctx())
        loopback = await executor.execute(GrpcTarget("127.0.0.1:50051", SAY), make_ctx())
    finally:
        await executor.close()
    assert result.outcome is Outcome.ERROR
    assert result.error == (
        "refused by the SSRF guard: 10.0.0.1, a private address (not in allowed_networks)"
    )
    assert loopback.error is not None
    assert "a loopback address" in loopback.error
    assert executor.open_channels() == []


async def test_a_name_that_resolves_to_a_private_address_is_refused(clock: ManualClock) -> None:
    asked: list[tuple[str, int]] = []

    async def resolve(host: str, port: int) -> list[str]:
        asked.append((host, port))
        return ["93.184.215.14", "10.0.0.1"]  # one refused address refuses the whole answer

    executor = GrpcExecutor(WorkerSettings(), clock=clock, resolve=resolve)
    try:
        result = await executor.execute(GrpcTarget("jobs.example.com:443", SAY, tls=True), make_ctx())
    finally:
        await executor.close()
    assert asked == [("jobs.example.com", 443)]
    assert result.outcome is Outcome.ERROR
    assert result.error == (
        "refused by the SSRF guard: jobs.example.com resolves to 10.0.0.1 is "
        "a private address (not in allowed_networks)"
    )
    assert executor.open_channels() == []


async def test_a_name_is_connected_to_at_the_address_it_was_checked_at(
    server: EchoServer, clock: ManualClock
) -> None:
    async def resolve(host: str, port: int) -> list[str]:
        return ["127.0.0.1"]

    executor = GrpcExecutor(LOOPBACK, clock=clock, resolve=resolve)
    try:
        result = await executor.execute(GrpcTarget(f"echo.test:{server.port}", SAY), make_ctx())
    finally:
        await executor.close()
    assert result.outcome is Outcome.SUCCESS, result.error
    assert (
        server.calls[0].metadata.get(":authority", f"echo.test:{server.port}") == f"echo.test:{server.port}"
    )


# -- secrets --------------------------------------------------------------------------------------------

TOKEN = "grpc-bearer-7f3a-value"
KEYS = Keyring([new_key("k1")])


@pytest.fixture
def store_clock() -> None:
    """tests/conftest.py's ``store`` keeps its own clock here (the system's)."""


async def test_secret_metadata_reaches_the_server_and_nothing_else(
    server: EchoServer, store: SqlStore, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    sealed = seal(KEYS, "payments", "api-token", TOKEN)
    await store.put_secret(StoredSecret("payments", "api-token", sealed.key_id, sealed.value))
    executors = Executors(LOOPBACK, clock=clock, secrets=SecretResolver(store, KEYS, clock=clock, ttl_s=0))
    target = GrpcTarget(server.address, SAY, metadata=(("authorization", SecretRef("api-token")),))
    caplog.set_level(logging.DEBUG)
    try:
        ok = await executors.execute(target, make_ctx())
        echoed = await executors.execute(target, make_ctx(payload={"name": f"status:NOT_FOUND {TOKEN}"}))
    finally:
        await executors.close()
    assert ok.outcome is Outcome.SUCCESS, ok.error
    assert server.calls[0].metadata["authorization"] == TOKEN
    # a status message that echoes the credential is redacted
    assert echoed.error is not None
    assert "[secret:api-token]" in echoed.error
    assert TOKEN not in repr(ok) + repr(echoed)
    assert TOKEN not in caplog.text


async def test_a_missing_secret_fails_the_attempt_before_calling(
    server: EchoServer, store: SqlStore, clock: ManualClock
) -> None:
    executor = GrpcExecutor(LOOPBACK, clock=clock, secrets=SecretResolver(store, KEYS, clock=clock))
    target = GrpcTarget(server.address, SAY, metadata=(("authorization", SecretRef("absent")),))
    try:
        result = await executor.execute(target, make_ctx())
    finally:
        await executor.close()
    assert result.outcome is Outcome.ERROR
    assert result.error is not None
    assert "secret 'absent' does not exist" in result.error
    assert server.methods == []


# -- the channel pool ----------------------------------------------------------------------------------


def client_port(server: EchoServer, index: int) -> str:
    return server.calls[index].peer.rsplit(":", 1)[1]


async def test_attempts_share_a_channel_until_it_is_idle_then_a_new_one_is_opened(
    server: EchoServer, executor: GrpcExecutor, clock: ManualClock
) -> None:
    target = GrpcTarget(server.address, SAY)
    assert (await executor.execute(target, make_ctx())).outcome is Outcome.SUCCESS
    clock.advance(30)
    assert (await executor.execute(target, make_ctx())).outcome is Outcome.SUCCESS
    assert client_port(server, 0) == client_port(server, 1)  # one connection, reused
    assert executor.open_channels() == [(server.address, False)]
    clock.advance(59)
    assert await executor.close_idle() == 0
    clock.advance(2)  # 61 s since the last use: idle
    assert await executor.close_idle() == 1
    assert executor.open_channels() == []
    assert (await executor.execute(target, make_ctx())).outcome is Outcome.SUCCESS
    assert client_port(server, 2) != client_port(server, 1)  # a new connection
    assert executor.open_channels() == [(server.address, False)]


async def test_the_reaper_closes_idle_channels_without_another_attempt(server: EchoServer) -> None:
    executor = GrpcExecutor(replace(LOOPBACK, grpc_idle_s=0.1))
    try:
        assert (
            await executor.execute(GrpcTarget(server.address, SAY), make_ctx())
        ).outcome is Outcome.SUCCESS
        assert executor.open_channels() == [(server.address, False)]
        for _ in range(100):
            if not executor.open_channels():
                break
            await __import__("asyncio").sleep(0.05)
        assert executor.open_channels() == []
    finally:
        await executor.close()


async def test_close_closes_every_channel(server: EchoServer, clock: ManualClock) -> None:
    other = await EchoServer().start()
    executor = GrpcExecutor(LOOPBACK, clock=clock)
    try:
        for address in (server.address, other.address):
            assert (await executor.execute(GrpcTarget(address, SAY), make_ctx())).outcome is Outcome.SUCCESS
        channels = [pooled.channel for pooled in executor._channels.values()]
        assert len(channels) == 2
        await executor.close()
        assert executor.open_channels() == []
        for channel in channels:  # a closed channel refuses new calls
            with pytest.raises(Exception, match="closed"):
                await channel.unary_unary("/cwtest.Echo/Say", None, None)(b"")
    finally:
        await executor.close()
        await other.stop()


async def test_the_worker_dispatches_grpc_targets(server: EchoServer, clock: ManualClock) -> None:
    executors = Executors(LOOPBACK, clock=clock)
    try:
        result = await executors.execute(GrpcTarget(server.address, SAY), make_ctx())
    finally:
        await executors.close()
    assert result.outcome is Outcome.SUCCESS

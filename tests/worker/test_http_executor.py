"""HttpExecutor against a live aiohttp sink on 127.0.0.1 (no traffic ever leaves loopback).

Addresses other than loopback (10/8, 169.254/16, ...) are tested on the checking functions only.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any
from urllib.parse import quote

import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult
from multidict import CIMultiDict

import suite_workers
from cronwheel.clock import ManualClock
from cronwheel.model import HttpTarget, Outcome
from cronwheel.worker.executors import AttemptContext, Executors, WorkerSettings
from cronwheel.worker.executors.http import (
    BlockedAddressError,
    GuardedResolver,
    HttpExecutor,
    address_refusal,
    guarded_socket_factory,
    parse_networks,
    parse_retry_after,
)

NOW = datetime(2025, 1, 2, 3, 4, 30, tzinfo=UTC)
SLOT = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
LOOPBACK = WorkerSettings(allowed_networks=("127.0.0.0/8",))
SECRET = "s3cr3t-token-value"


def make_ctx(**changes: Any) -> AttemptContext:
    ctx = AttemptContext(
        execution_id="0193f2a4-run-0001",
        job_id="job-42",
        job_name="nightly",
        team="payments",
        scheduled_at=SLOT,
        attempt=2,
        timeout_s=5.0,
        payload={"hello": "world", "n": 1},
    )
    return replace(ctx, **changes)


# -- the sink ------------------------------------------------------------------------------------


@dataclass
class Seen:
    method: str
    path: str
    headers: CIMultiDict[str]
    body: bytes
    peer_port: int


@dataclass
class Sink:
    base: str  # http://127.0.0.1:<port>
    port: int
    seen: list[Seen] = field(default_factory=list)

    def url(self, path: str = "/ok", host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"


async def _handle(request: web.Request) -> web.StreamResponse:
    sink = request.app[SINK]
    peer = request.transport.get_extra_info("peername") if request.transport else None
    sink.seen.append(
        Seen(
            request.method,
            request.path,
            CIMultiDict(request.headers),
            await request.read(),
            peer[1] if peer else 0,
        )
    )
    query = request.query
    if request.path == "/hang":
        await asyncio.sleep(30)
    if "delay" in query:
        await asyncio.sleep(float(query["delay"]))
    status = int(query.get("status", "200"))
    headers = {}
    if "retry_after" in query:
        headers["Retry-After"] = query["retry_after"]
    if "close" in query:
        headers["Connection"] = "close"
    if "location" in query:
        headers["Location"] = query["location"]
    if "cookie" in query:
        headers["Set-Cookie"] = query["cookie"]
    if "answer" in query:  # a header of the answer that holds what the query says
        headers["X-Answer"] = query["answer"]
    for n in range(int(query.get("many", "0"))):
        headers[f"X-Many-{n:03d}"] = "v"
    body = b"x" * int(query["size"]) if "size" in query else b"a\0b\xff" if "binary" in query else b"ok"
    return web.Response(status=status, body=body, headers=headers)


SINK = web.AppKey("sink", Sink)


@pytest.fixture
async def sink() -> AsyncIterator[Sink]:
    state = Sink(base="", port=0)
    app = web.Application()
    app[SINK] = state
    app.router.add_route("*", "/{tail:.*}", _handle)
    runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    state.base, state.port = f"http://127.0.0.1:{port}", port
    yield state
    await runner.cleanup()


@pytest.fixture
async def executor() -> AsyncIterator[HttpExecutor]:
    ex = HttpExecutor(LOOPBACK, clock=ManualClock(NOW))
    yield ex
    await ex.close()


class FakeResolver(AbstractResolver):
    """Answers from a table (or raises), like a DNS server under the test's control."""

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table
        self.asked: list[str] = []

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        self.asked.append(host)
        if host not in self.table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [
            ResolveResult(
                hostname=host,
                host=addr,
                port=port,
                family=socket.AF_INET6 if ":" in addr else socket.AF_INET,
                proto=0,
                flags=socket.AI_NUMERICHOST,
            )
            for addr in self.table[host]
        ]

    async def close(self) -> None:
        pass


# -- the webhook contract ------------------------------------------------------------------------


async def test_headers_and_json_body(sink: Sink, executor: HttpExecutor) -> None:
    target = HttpTarget(
        url=sink.url("/hook?x=1"),
        headers=(("Authorization", f"Bearer {SECRET}"), ("Idempotency-Key", "forged")),
    )
    result = await executor.execute(target, make_ctx())
    assert result.outcome is Outcome.SUCCESS
    assert result.status_code == 200
    assert result.output == "ok"
    [seen] = sink.seen
    assert seen.method == "POST"
    assert seen.path == "/hook"
    h = seen.headers
    assert h["Idempotency-Key"] == "0193f2a4-run-0001"  # cronwheel's header wins over the target's
    assert h.getall("Idempotency-Key") == ["0193f2a4-run-0001"]
    assert h["webhook-id"] == "0193f2a4-run-0001"
    assert h["webhook-timestamp"] == str(int(NOW.timestamp()))
    assert h["X-Cronwheel-Job-Id"] == "job-42"
    assert h["X-Cronwheel-Scheduled-At"] == "2025-01-02T03:04:05Z"
    assert h["X-Cronwheel-Attempt"] == "2"
    assert h["Authorization"] == f"Bearer {SECRET}"
    assert h["Content-Type"] == "application/json"
    assert h["User-Agent"].startswith("cronwheel/")
    assert json.loads(seen.body) == {"hello": "world", "n": 1}


async def test_no_payload_sends_no_body(sink: Sink, executor: HttpExecutor) -> None:
    result = await executor.execute(HttpTarget(url=sink.url(), method="GET"), make_ctx(payload=None))
    assert result.outcome is Outcome.SUCCESS
    [seen] = sink.seen
    assert seen.method == "GET"
    assert seen.body == b""
    assert "Content-Type" not in seen.headers


async def test_scheduled_at_keeps_sub_seconds_in_utc(sink: Sink, executor: HttpExecutor) -> None:
    slot = datetime(2025, 3, 30, 3, 0, 0, 250000, tzinfo=UTC).astimezone()
    await executor.execute(HttpTarget(url=sink.url()), make_ctx(scheduled_at=slot))
    assert sink.seen[0].headers["X-Cronwheel-Scheduled-At"] == "2025-03-30T03:00:00.250000Z"


@pytest.mark.parametrize(
    ("status", "expected", "outcome"),
    [
        (200, (), Outcome.SUCCESS),
        (204, (), Outcome.SUCCESS),
        (299, (), Outcome.SUCCESS),
        (404, (), Outcome.FAILURE),
        (500, (), Outcome.FAILURE),
        (200, (201,), Outcome.FAILURE),
        (201, (201,), Outcome.SUCCESS),
        (409, (200, 409), Outcome.SUCCESS),
    ],
)
async def test_success_by_status(
    sink: Sink, executor: HttpExecutor, status: int, expected: tuple[int, ...], outcome: Outcome
) -> None:
    target = HttpTarget(url=sink.url(f"/s?status={status}"), expected_status=expected)
    result = await executor.execute(target, make_ctx())
    assert result.outcome is outcome
    assert result.status_code == status
    if outcome is Outcome.FAILURE:
        assert result.error is not None
        assert f"HTTP {status}" in result.error
    else:
        assert result.error is None


async def test_redirect_is_not_followed(sink: Sink, executor: HttpExecutor) -> None:
    target = HttpTarget(url=sink.url("/r?status=302&location=/ok"))
    result = await executor.execute(target, make_ctx())
    assert result.outcome is Outcome.FAILURE
    assert result.status_code == 302
    assert result.error is not None
    assert "redirects are not followed" in result.error
    assert [s.path for s in sink.seen] == ["/r"]  # /ok was never asked for

    allowed = await executor.execute(replace(target, expected_status=(302,)), make_ctx())
    assert allowed.outcome is Outcome.SUCCESS
    assert [s.path for s in sink.seen] == ["/r", "/r"]


async def test_body_is_cut_at_output_limit(sink: Sink, executor: HttpExecutor) -> None:
    result = await executor.execute(HttpTarget(url=sink.url("/big?size=100000")), make_ctx())
    assert result.outcome is Outcome.SUCCESS
    assert result.output == "x" * 1024

    small = HttpExecutor(replace(LOOPBACK, output_limit=10))
    try:
        result = await small.execute(HttpTarget(url=sink.url("/big?size=50")), make_ctx())
    finally:
        await small.close()
    assert result.output == "x" * 10


async def test_connections_are_pooled(sink: Sink, executor: HttpExecutor) -> None:
    for _ in range(3):
        assert (await executor.execute(HttpTarget(url=sink.url()), make_ctx())).outcome is Outcome.SUCCESS
    assert len({s.peer_port for s in sink.seen}) == 1  # one keep-alive connection served all three


# -- the headers of the answer --------------------------------------------------------------------


async def test_the_headers_answered_are_kept_in_order_with_credentials_redacted(
    sink: Sink, executor: HttpExecutor
) -> None:
    result = await executor.execute(HttpTarget(url=sink.url("/h?cookie=sid%3D42&answer=plain")), make_ctx())
    assert result.response_headers is not None
    kept = dict(result.response_headers)
    assert kept["Set-Cookie"] == "[redacted]"
    assert kept["X-Answer"] == "plain"
    assert kept["Content-Length"] == "2"
    assert "sid=42" not in repr(result)


async def test_the_headers_answered_are_capped(sink: Sink, executor: HttpExecutor) -> None:
    result = await executor.execute(HttpTarget(url=sink.url("/h?many=100")), make_ctx())
    assert result.response_headers is not None
    assert len(result.response_headers) == 64  # redaction.MAX_KEPT_HEADERS


async def test_no_answer_keeps_no_headers_answered(executor: HttpExecutor) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    result = await executor.execute(HttpTarget(url=f"http://127.0.0.1:{port}/x"), make_ctx())
    assert result.outcome is Outcome.ERROR
    assert result.response_headers is None


# -- Retry-After ---------------------------------------------------------------------------------


async def test_retry_after_delta_seconds(sink: Sink, executor: HttpExecutor) -> None:
    result = await executor.execute(HttpTarget(url=sink.url("/r?status=429&retry_after=7")), make_ctx())
    assert result.outcome is Outcome.FAILURE
    assert result.status_code == 429
    assert result.retry_after_s == 7.0


async def test_retry_after_http_date(sink: Sink, executor: HttpExecutor) -> None:
    when = format_datetime(NOW + timedelta(seconds=120), usegmt=True)  # NOW is the executor's clock
    target = HttpTarget(url=sink.url(f"/r?status=503&retry_after={quote(when)}"))
    result = await executor.execute(target, make_ctx())
    assert result.status_code == 503
    assert result.retry_after_s == 120.0


async def test_retry_after_ignored_on_other_statuses(sink: Sink, executor: HttpExecutor) -> None:
    result = await executor.execute(HttpTarget(url=sink.url("/r?status=500&retry_after=7")), make_ctx())
    assert result.retry_after_s is None


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("0", 0.0),
        ("  30 ", 30.0),
        ("Thu, 02 Jan 2025 03:05:30 GMT", 60.0),
        ("Thu, 02 Jan 2025 03:00:00 GMT", 0.0),  # in the past: no wait, never negative
        ("Thu, 02 Jan 2025 03:05:00 -0000", 30.0),
        ("-5", None),
        ("1.5", None),
        ("soon", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_retry_after(value: str | None, seconds: float | None) -> None:
    assert parse_retry_after(value, NOW) == seconds


# -- timeouts and connection errors --------------------------------------------------------------


async def test_timeout(sink: Sink, executor: HttpExecutor) -> None:
    started = time.monotonic()
    result = await executor.execute(HttpTarget(url=sink.url("/hang")), make_ctx(timeout_s=0.3))
    elapsed = time.monotonic() - started
    assert result.outcome is Outcome.TIMEOUT
    assert 0.25 <= elapsed < 1.0
    assert result.error == "no complete response within 0.3 s"


async def test_deadline_shortens_the_timeout(sink: Sink) -> None:
    clock = ManualClock(NOW)
    ex = HttpExecutor(LOOPBACK, clock=clock)
    try:
        started = time.monotonic()
        ctx = make_ctx(timeout_s=30.0, deadline=NOW + timedelta(seconds=0.2))
        result = await ex.execute(HttpTarget(url=sink.url("/hang")), ctx)
        assert result.outcome is Outcome.TIMEOUT
        assert time.monotonic() - started < 1.0

        past = await ex.execute(HttpTarget(url=sink.url()), make_ctx(deadline=NOW - timedelta(seconds=1)))
        assert past.outcome is Outcome.TIMEOUT
        assert [s.path for s in sink.seen] == ["/hang"]  # nothing sent once the deadline passed
    finally:
        await ex.close()


async def test_connection_refused(executor: HttpExecutor) -> None:
    port = suite_workers.free_port()  # a loopback port nobody listens on
    result = await executor.execute(HttpTarget(url=f"http://127.0.0.1:{port}/x?token={SECRET}"), make_ctx())
    assert result.outcome is Outcome.ERROR
    assert result.error is not None
    assert result.error.startswith(f"cannot connect to http://127.0.0.1:{port}")
    assert SECRET not in result.error


async def test_dns_failure() -> None:
    ex = HttpExecutor(LOOPBACK, resolver=FakeResolver({}))
    try:
        result = await ex.execute(HttpTarget(url="http://no-such-host.invalid/"), make_ctx())
    finally:
        await ex.close()
    assert result.outcome is Outcome.ERROR
    assert result.error is not None
    assert result.error.startswith("cannot resolve no-such-host.invalid")


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (HttpTarget(url="ftp://127.0.0.1/x"), "target.url must be an absolute http:// or https:// URL"),
        (HttpTarget(url="/relative"), "target.url must be an absolute http:// or https:// URL"),
        (
            HttpTarget(url="http://127.0.0.1/", method="GET /x"),
            "target.method must be an HTTP method name (a token such as POST)",
        ),
        (
            HttpTarget(url="http://127.0.0.1/", headers=(("Bad Name", "v"),)),
            "target.headers has a name that is not an HTTP token: 'Bad Name'",
        ),
        (
            HttpTarget(url="http://127.0.0.1/", headers=(("X-Token", f"{SECRET}\r\nEvil: 1"),)),
            "target.headers['X-Token'] contains a control character",
        ),
    ],
)
async def test_bad_targets_are_errors(executor: HttpExecutor, target: HttpTarget, message: str) -> None:
    result = await executor.execute(target, make_ctx())
    assert result.outcome is Outcome.ERROR
    assert result.error == message


async def test_a_binary_body_is_kept_as_storable_text(sink: Sink) -> None:
    """A NUL in the kept output would make PostgreSQL refuse to record the attempt."""
    executors = Executors(LOOPBACK)
    try:
        result = await executors.execute(HttpTarget(url=sink.url("/ok?binary=1")), make_ctx())
    finally:
        await executors.close()
    assert (result.outcome, result.output) == (Outcome.SUCCESS, "a\ufffdb\ufffd")


async def test_close_then_reuse(sink: Sink, executor: HttpExecutor) -> None:
    assert (await executor.execute(HttpTarget(url=sink.url()), make_ctx())).outcome is Outcome.SUCCESS
    await executor.close()
    await executor.close()  # idempotent
    assert (await executor.execute(HttpTarget(url=sink.url()), make_ctx())).outcome is Outcome.SUCCESS


# -- the SSRF guard: end to end on loopback ------------------------------------------------------


async def test_loopback_refused_by_default(sink: Sink) -> None:
    ex = HttpExecutor()  # no allowed_networks
    try:
        literal = await ex.execute(HttpTarget(url=sink.url()), make_ctx())
        v6 = await ex.execute(HttpTarget(url=f"http://[::1]:{sink.port}/"), make_ctx())
        mapped = await ex.execute(HttpTarget(url=f"http://[::ffff:127.0.0.1]:{sink.port}/"), make_ctx())
    finally:
        await ex.close()
    for result in (literal, v6, mapped):
        assert result.outcome is Outcome.ERROR
        assert result.status_code is None
        assert result.error is not None
        assert result.error.startswith("refused by the SSRF guard")
        assert "loopback" in result.error
    assert sink.seen == []  # nothing was sent


async def test_name_resolving_to_loopback_refused(sink: Sink) -> None:
    resolver = FakeResolver({"hooks.example": ["127.0.0.1"]})
    ex = HttpExecutor(resolver=resolver)
    try:
        result = await ex.execute(HttpTarget(url=sink.url(host="hooks.example")), make_ctx())
    finally:
        await ex.close()
    assert result.outcome is Outcome.ERROR
    assert result.error == (
        "refused by the SSRF guard: hooks.example resolves to 127.0.0.1 is a loopback address "
        "(not in allowed_networks)"
    )
    assert resolver.asked == ["hooks.example"]
    assert sink.seen == []


async def test_rebinding_answer_refused_after_a_good_one(sink: Sink) -> None:
    """A name first answering an allowed address, then a refused one, is refused the second time:
    each connection is checked, not just the first lookup."""
    resolver = FakeResolver({"rebind.example": ["127.0.0.1"]})
    ex = HttpExecutor(WorkerSettings(allowed_networks=("127.0.0.1/32",)), resolver=resolver)
    try:
        url = sink.url("/ok?close=1", host="rebind.example")  # the sink closes: no pooled connection
        first = await ex.execute(HttpTarget(url=url), make_ctx())
        assert first.outcome is Outcome.SUCCESS
        assert sink.seen[0].headers["Host"] == f"rebind.example:{sink.port}"
        resolver.table["rebind.example"] = ["127.0.0.2"]  # outside allowed_networks
        ex._get_pool().clear_dns_cache()  # as if the cached answer's TTL ran out
        second = await ex.execute(HttpTarget(url=url), make_ctx())
    finally:
        await ex.close()
    assert second.outcome is Outcome.ERROR
    assert second.error is not None
    assert "127.0.0.2" in second.error
    assert len(sink.seen) == 1


async def test_loopback_allowed_by_allowed_networks(sink: Sink) -> None:
    ex = HttpExecutor(WorkerSettings(allowed_networks=("127.0.0.0/8",)))
    try:
        result = await ex.execute(HttpTarget(url=sink.url()), make_ctx())
    finally:
        await ex.close()
    assert result.outcome is Outcome.SUCCESS
    assert len(sink.seen) == 1


# -- the SSRF guard: the checks themselves (no traffic) -------------------------------------------


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("127.255.255.254", "loopback"),
        ("10.0.0.1", "private"),
        ("172.16.5.4", "private"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "link-local"),  # cloud metadata
        ("0.0.0.0", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("240.0.0.1", "reserved"),  # (Python files it under private)
        ("100.64.0.1", "carrier-grade NAT"),
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("fe80::1", "link-local"),
        ("fe80::1%eth0", "link-local"),
        ("fc00::1", "private"),
        ("fd12:3456::1", "private"),
        ("ff02::1", "multicast"),
        ("fec0::1", "site-local"),
        ("::ffff:127.0.0.1", "loopback"),  # IPv4-mapped
        ("::ffff:10.0.0.1", "private"),
        ("::ffff:169.254.169.254", "link-local"),
        ("::127.0.0.1", "IPv4-compatible"),  # deprecated
        ("64:ff9b::a9fe:a9fe", "link-local"),  # NAT64 of 169.254.169.254
        ("2002:a00:1::1", "private"),  # 6to4 of 10.0.0.1
        ("not-an-ip", "not an IP address"),
    ],
)
def test_refused_addresses(address: str, kind: str) -> None:
    reason = address_refusal(address)
    assert reason is not None
    assert kind in reason


@pytest.mark.parametrize(
    "address", ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808"]
)
def test_public_addresses_pass(address: str) -> None:
    assert address_refusal(address) is None


def test_allowed_networks() -> None:
    allowed = parse_networks(["127.0.0.0/8", "10.1.0.0/16", "fd00::/8"])
    assert address_refusal("127.0.0.1", allowed) is None
    assert address_refusal("::ffff:127.0.0.1", allowed) is None  # mapped: judged as 127.0.0.1
    assert address_refusal("10.1.2.3", allowed) is None
    assert address_refusal("fd00::5", allowed) is None
    assert address_refusal("10.2.0.1", allowed) is not None
    assert address_refusal("::1", allowed) is not None  # IPv6 loopback is not in 127.0.0.0/8
    assert address_refusal("169.254.169.254", allowed) is not None
    with pytest.raises(ValueError, match="does not appear to be"):
        parse_networks(["nonsense"])
    with pytest.raises(ValueError, match="does not appear to be"):
        HttpExecutor(WorkerSettings(allowed_networks=("10.0.0.0/33",)))


@pytest.mark.parametrize("address", ["10.0.0.1", "169.254.169.254", "::1", "::ffff:127.0.0.1"])
def test_socket_factory_refuses_before_creating_a_socket(address: str) -> None:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sockaddr: tuple[Any, ...] = (address, 80, 0, 0) if family == socket.AF_INET6 else (address, 80)
    create = guarded_socket_factory(())
    with pytest.raises(BlockedAddressError) as caught:
        create((family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", sockaddr))
    assert caught.value.address == address


def test_socket_factory_allows_allowed_networks() -> None:
    create = guarded_socket_factory(parse_networks(["127.0.0.0/8"]))
    sock = create((socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", ("127.0.0.1", 80)))
    sock.close()  # created, never connected


@pytest.mark.parametrize(
    "answer",
    [["169.254.169.254"], ["10.0.0.1"], ["::1"], ["::ffff:127.0.0.1"], ["93.184.215.14", "10.0.0.1"]],
)
async def test_guarded_resolver_refuses_any_bad_answer(answer: list[str]) -> None:
    resolver = GuardedResolver(FakeResolver({"evil.example": answer}), ())
    with pytest.raises(BlockedAddressError, match=r"evil\.example resolves to"):
        await resolver.resolve("evil.example", 80)


async def test_guarded_resolver_passes_public_answers() -> None:
    resolver = GuardedResolver(FakeResolver({"good.example": ["93.184.215.14", "2606:2800:21f:cb07::1"]}), ())
    answers = await resolver.resolve("good.example", 443)
    assert [a["host"] for a in answers] == ["93.184.215.14", "2606:2800:21f:cb07::1"]


# -- the registry --------------------------------------------------------------------------------


async def test_registry_dispatches_by_kind(sink: Sink) -> None:
    executors = Executors(LOOPBACK)
    try:
        result = await executors.execute(HttpTarget(url=sink.url()), make_ctx())
    finally:
        await executors.close()
    assert result.outcome is Outcome.SUCCESS
    assert len(sink.seen) == 1


async def test_registry_turns_executor_bugs_into_errors() -> None:
    class Broken:
        async def execute(self, target: Any, ctx: AttemptContext) -> Any:
            raise RuntimeError(SECRET)

        async def close(self) -> None:
            raise RuntimeError("close failed")

    executors = Executors(overrides={"http": Broken()})
    result = await executors.execute(HttpTarget(url="http://127.0.0.1/"), make_ctx())
    assert result.outcome is Outcome.ERROR
    assert result.error == "internal executor error: RuntimeError"
    await executors.close()  # logs, does not raise


async def test_a_body_beyond_the_excerpt_is_kept_up_to_the_tail_bound(
    sink: Sink, executor: HttpExecutor
) -> None:
    result = await executor.execute(HttpTarget(url=sink.url("/big?size=100000")), make_ctx())
    assert result.output == "x" * 1024  # the excerpt, as before
    assert result.output_tail == "x" * 65_536  # the body's start, read no further
    small = await executor.execute(HttpTarget(url=sink.url("/big?size=50")), make_ctx())
    assert small.output_tail is None


async def test_a_target_is_checked_once_and_refused_at_every_attempt(executor: HttpExecutor) -> None:
    """The check of a target without secret references depends on the target alone: made at its
    first attempt, kept, and its refusal given to every attempt."""
    target = HttpTarget(url="http://10.0.0.1/hook")
    first = await executor.execute(target, make_ctx())
    again = await executor.execute(HttpTarget(url="http://10.0.0.1/hook"), make_ctx(attempt=3))
    assert first.outcome is again.outcome is Outcome.ERROR
    assert first.error == again.error
    assert (first.error or "").startswith("refused by the SSRF guard")
    assert list(executor._plans) == [target]

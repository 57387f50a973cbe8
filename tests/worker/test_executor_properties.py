"""Every executor turns any target and any attempt context into an ``AttemptResult`` and never
raises (the Executor contract in docs/architecture.md: never raise for a target's faults; the
registry's catch-all, which answers "internal executor error" and logs a traceback, is for
executor bugs only).

Generated: targets from plausible to hostile (NUL bytes, lone surrogates, control characters,
URLs yarl or IDNA refuse, oversized arguments, unknown programs, references that are not
``module:function``), payloads (any JSON a job may hold), timeouts and deadlines (negative, zero,
NaN, infinite). Each executor runs for real: HTTP against an aiohttp server on 127.0.0.1 (names
resolve to it through a test resolver, so nothing leaves the machine), commands as processes,
Python functions of this module that return or raise anything.

Commands run only fixed programs (``echo``, ``true``, ``false``, ``cat`` on stdin, ``sleep`` of at
most 0.3 s, a fixed ``sh`` script that prints its arguments): generated text is never a program
or a script. Deterministic (``derandomize``) and bounded: together a few seconds.
"""

from __future__ import annotations

import asyncio
import math
import socket
import time
from collections.abc import Callable, Coroutine
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cronwheel.clock import ManualClock
from cronwheel.jobs.service import check_payload
from cronwheel.model import AttemptResult, CommandTarget, GrpcTarget, HttpTarget, Outcome, PythonTarget
from cronwheel.worker.executors import AttemptContext, WorkerSettings
from cronwheel.worker.executors.command import CommandExecutor
from cronwheel.worker.executors.grpc import GrpcExecutor
from cronwheel.worker.executors.http import HttpExecutor
from cronwheel.worker.executors.python import PythonExecutor
from grpc_echo import SAY, WATCH, EchoServer, descriptor_set

HERE = __name__
NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
OUTCOMES = {Outcome.SUCCESS, Outcome.FAILURE, Outcome.TIMEOUT, Outcome.ERROR}
T = TypeVar("T")


def tuned(examples: int) -> settings:
    return settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )


def check(result: object) -> None:
    assert isinstance(result, AttemptResult), result
    assert result.outcome in OUTCOMES, result
    assert not (result.error or "").startswith("internal executor error"), result


def no_tracebacks(caplog: pytest.LogCaptureFixture) -> None:
    ours = [r for r in caplog.records if r.name.startswith("cronwheel") and (r.exc_info or r.levelno >= 40)]
    assert not ours, [r.getMessage() for r in ours]


# -- what every attempt gets -----------------------------------------------------------------------


def _json_ok(value: Any) -> bool:
    try:
        check_payload(value)
    except ValueError:
        return False
    return True


def mostly(usual: st.SearchStrategy[T], odd: st.SearchStrategy[T]) -> st.SearchStrategy[T]:
    """``usual`` about four times in five, so that most attempts get past the checks and run."""
    return st.integers(0, 4).flatmap(lambda pick: odd if pick == 2 else usual)


plain_text = st.text(st.characters(min_codepoint=32, max_codepoint=0x2FF), max_size=12)
SPECIALS = ["", "\0", "a\0b", "\ud800", "\udcff", "\r\n", "\t", "\x01", "\x7f", "é中", "=", " ", "-"]
hostile_text = st.integers(0, 2).flatmap(
    lambda pick: (
        st.text(st.characters(exclude_categories=()), max_size=12) if pick == 0 else st.sampled_from(SPECIALS)
    )
)
any_text = mostly(plain_text, hostile_text)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | any_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(any_text, inner, max_size=3),
    max_leaves=8,
)
payloads = json_values.filter(_json_ok)  # what a job or a manual run may hold
timeouts = mostly(
    st.floats(0.1, 0.4), st.sampled_from([0.0, -0.0, -1.0, 1e-9, math.nan, math.inf, -math.inf])
)
deadlines = mostly(st.none(), st.floats(-5.0, 1.0).map(lambda s: NOW + timedelta(seconds=s)))
CTX = AttemptContext("run-1", "job-1", "nightly", "ops", NOW, attempt=1, timeout_s=0.3)
contexts = st.builds(
    AttemptContext,
    execution_id=st.uuids().map(str),  # ids are the store's UUIDs
    job_id=st.uuids().map(str),
    job_name=any_text,
    team=any_text,
    scheduled_at=st.datetimes(timezones=st.just(UTC)),
    attempt=st.integers(1, 1000),
    timeout_s=timeouts,
    payload=payloads,
    deadline=deadlines,
)


def run_in(runner: asyncio.Runner, make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    return runner.run(make())


# -- http -------------------------------------------------------------------------------------------


class ToLoopback(AbstractResolver):
    """Every name is 127.0.0.1 (names ending in .fail do not resolve): no DNS traffic."""

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        if host.endswith(".fail"):
            raise OSError("no such name")
        return [
            ResolveResult(hostname=host, host="127.0.0.1", port=port, family=socket.AF_INET, proto=0, flags=0)
        ]

    async def close(self) -> None:
        pass


async def _respond(request: web.Request) -> web.Response:
    await request.read()
    status = {"/teapot": 418, "/redirect": 302, "/busy": 503}.get(request.path, 200)
    return web.Response(status=status, body=b"ok\0\xff", headers={"Retry-After": "x"})


async def _serve() -> tuple[web.AppRunner, int]:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", _respond)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port: int = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, port


def http_targets(port: int) -> st.SearchStrategy[HttpTarget]:
    hosts = mostly(
        st.sampled_from([f"127.0.0.1:{port}", f"hooks.example:{port}", f"[::ffff:127.0.0.1]:{port}"]),
        st.sampled_from(["name.fail", "[::1]", "10.0.0.1", "a..b", "xn--", "[::1", "h:99999"])
        | hostile_text.map(lambda text: f"{text}:{port}"),
    )
    paths = mostly(
        st.sampled_from(["/", "/teapot", "/redirect", "/busy", "/?q=a b#f"]) | plain_text.map("/{}".format),
        hostile_text.map("/{}".format),
    )
    schemes = mostly(st.sampled_from(["http", "HTTP"]), st.sampled_from(["https", "ftp", ""]))
    urls = mostly(st.builds("{}://{}{}".format, schemes, hosts, paths), hostile_text)
    names = mostly(
        st.sampled_from(
            ["X-Token", "User-Agent", "Content-Length", "Idempotency-Key", "Host", "Transfer-Encoding"]
        ),
        hostile_text,
    )
    return st.builds(
        HttpTarget,
        url=urls,
        method=mostly(
            st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE", "get", "PURGE"]), hostile_text
        ),
        headers=st.lists(st.tuples(names, any_text), max_size=3).map(tuple),
        expected_status=st.lists(st.integers(-1000, 1000), max_size=3).map(tuple),
    )


def test_http_executor_answers_every_input(caplog: pytest.LogCaptureFixture) -> None:
    with asyncio.Runner() as runner:
        server, port = run_in(runner, _serve)
        settings_ = WorkerSettings(allowed_networks=("127.0.0.0/8",), output_limit=16)
        executor = HttpExecutor(settings_, clock=ManualClock(NOW), resolver=ToLoopback())

        @tuned(200)
        @given(target=http_targets(port), ctx=contexts)
        @example(target=HttpTarget(url=f"http://127.0.0.1:{port}/", headers=(("X", "a\x01b"),)), ctx=CTX)
        @example(target=HttpTarget(url=f"http://127.0.0.1:{port}/"), ctx=replace(CTX, timeout_s=math.inf))
        @example(target=HttpTarget(url="http://a..b/"), ctx=CTX)
        @example(target=HttpTarget(url="http://xn--/"), ctx=CTX)
        def attempt(target: HttpTarget, ctx: AttemptContext) -> None:
            check(run_in(runner, lambda: executor.execute(target, ctx)))

        try:
            attempt()
        finally:
            run_in(runner, executor.close)
            run_in(runner, server.cleanup)
    no_tracebacks(caplog)


# -- grpc -------------------------------------------------------------------------------------------


def grpc_targets(port: int) -> st.SearchStrategy[GrpcTarget]:
    addresses = mostly(
        st.sampled_from([f"127.0.0.1:{port}", f"echo.test:{port}", f"[::ffff:127.0.0.1]:{port}"]),
        st.sampled_from(["name.fail:1", "10.0.0.1:1", "[::1]:1", "a..b:1", "h:99999", "h", "u@h:1", "[::1"])
        | hostile_text.map(lambda text: f"{text}:{port}"),
    )
    methods = mostly(st.sampled_from([SAY, WATCH, "cwtest.Echo/Nope", "no.Such/Svc"]), hostile_text)
    keys = mostly(st.sampled_from(["x-team", "idempotency-key", "authorization"]), hostile_text)
    sets = mostly(st.sampled_from([None, None, descriptor_set()]), hostile_text)
    return st.builds(
        GrpcTarget,
        address=addresses,
        method=methods,
        tls=st.booleans(),
        metadata=st.lists(st.tuples(keys, any_text), max_size=3).map(tuple),
        descriptor_set=sets,
    )


async def _to_loopback(host: str, port: int) -> list[str]:
    if host.endswith(".fail"):
        raise OSError("no such name")
    return ["127.0.0.1"]


def test_grpc_executor_answers_every_input(caplog: pytest.LogCaptureFixture) -> None:
    """Any target and context: an outcome, never an exception (payloads that are not a request of
    ``cwtest.Req`` included, and the echo server's own answers: statuses, sleeps)."""
    with asyncio.Runner() as runner:
        server = run_in(runner, EchoServer().start)
        settings_ = WorkerSettings(allowed_networks=("127.0.0.0/8",), output_limit=16)
        executor = GrpcExecutor(settings_, clock=ManualClock(NOW), resolve=_to_loopback)
        echo_payloads = st.sampled_from(
            [{"name": "status:INTERNAL"}, {"name": "sleep:0.5"}, {"name": "ok", "count": 2**40}]
        )

        @tuned(150)
        @given(target=grpc_targets(server.port), ctx=contexts, steer=st.none() | echo_payloads)
        @example(
            target=GrpcTarget(f"127.0.0.1:{server.port}", SAY),
            ctx=replace(CTX, timeout_s=math.inf),
            steer=None,
        )
        @example(target=GrpcTarget(f"127.0.0.1:{server.port}", SAY, tls=True), ctx=CTX, steer=None)
        def attempt(target: GrpcTarget, ctx: AttemptContext, steer: dict[str, Any] | None) -> None:
            ctx = ctx if steer is None else replace(ctx, payload=steer)
            check(run_in(runner, lambda: executor.execute(target, ctx)))

        try:
            attempt()
        finally:
            run_in(runner, executor.close)
            run_in(runner, server.stop)
    no_tracebacks(caplog)


# -- command ---------------------------------------------------------------------------------------

PRINT_ARGS = 'printf "%s|" "$@"; exit "${1:-0}"'


def command_targets(directory: str) -> st.SearchStrategy[CommandTarget]:
    args = st.lists(any_text, max_size=3)
    programs = mostly(
        st.one_of(
            st.tuples(st.sampled_from(["/bin/echo", "echo", "/bin/true", "/bin/false"]), args),
            st.tuples(st.sampled_from(["/bin/cat", "cat"]), st.just([])),  # the payload, from stdin
            st.tuples(st.just("/bin/sleep"), st.sampled_from(["0", "0.05", "0.3"]).map(lambda s: [s])),
            st.tuples(st.just("/bin/sh"), args.map(lambda rest: ["-c", PRINT_ARGS, "sh", *rest])),
        ),
        st.one_of(
            st.tuples(hostile_text.map("/nonexistent-cronwheel/{}".format), args),
            st.tuples(st.sampled_from(["", "\0", "sh\0", "\ud800", "cronwheel-no-such-program"]), args),
            st.tuples(st.just("/bin/true"), st.sampled_from([["x" * 140_000], ["y" * 100_000] * 12])),
        ),
    )
    env_names = mostly(st.sampled_from(["PATH", "HOME", "LANG", "CRONWHEEL_ATTEMPT", "FOO"]), hostile_text)
    cwds = mostly(
        st.sampled_from([None, directory, "/"]),
        st.sampled_from(["/nonexistent-cronwheel", "relative"]) | hostile_text,
    )
    return st.builds(
        lambda program, env, cwd: CommandTarget(argv=(program[0], *program[1]), env=env, cwd=cwd),
        programs,
        st.lists(st.tuples(env_names, any_text), max_size=3).map(tuple),
        cwds,
    )


def test_command_executor_answers_every_input(caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    executor = CommandExecutor(
        WorkerSettings(allow_commands=True, kill_grace_s=0.05, output_limit=16), clock=ManualClock(NOW)
    )
    with asyncio.Runner() as runner:

        @tuned(50)
        @given(target=command_targets(str(tmp_path)), ctx=contexts)
        @example(target=CommandTarget(argv=("/bin/echo", "a\0b")), ctx=CTX)
        @example(target=CommandTarget(argv=("/bin/echo",), env=(("A=B", "x"), ("", "y"))), ctx=CTX)
        @example(target=CommandTarget(argv=("/bin/echo", "\ud800"), cwd="/tmp\0"), ctx=CTX)
        def attempt(target: CommandTarget, ctx: AttemptContext) -> None:
            check(run_in(runner, lambda: executor.execute(target, ctx)))

        attempt()
    no_tracebacks(caplog)


# -- python ----------------------------------------------------------------------------------------


class _Unprintable(BaseException):  # deliberately not an Exception
    def __str__(self) -> str:
        raise ValueError("no text")


def returns_payload(payload: Any, ctx: AttemptContext) -> Any:
    return payload


def raises(payload: Any, ctx: AttemptContext) -> None:
    raise ValueError(payload)


def interrupts(payload: Any, ctx: AttemptContext) -> None:
    raise KeyboardInterrupt


def exits(payload: Any, ctx: AttemptContext) -> None:
    raise SystemExit(payload)


def unprintable(payload: Any, ctx: AttemptContext) -> None:
    raise _Unprintable


def returns_unprintable(payload: Any, ctx: AttemptContext) -> _Unprintable:
    return _Unprintable()


def returns_raw_text(payload: Any, ctx: AttemptContext) -> str:
    return "\0\ud800" * 10


def returns_coroutine(payload: Any, ctx: AttemptContext) -> Any:
    return async_raises(payload, ctx)


def sleeps(payload: Any, ctx: AttemptContext) -> None:
    time.sleep(0.05)


async def async_returns(payload: Any, ctx: AttemptContext) -> Any:
    return payload


async def async_raises(payload: Any, ctx: AttemptContext) -> None:
    raise RuntimeError("async")


async def async_cancelled(payload: Any, ctx: AttemptContext) -> None:
    raise asyncio.CancelledError


async def async_interrupts(payload: Any, ctx: AttemptContext) -> None:
    raise KeyboardInterrupt


async def async_sleeps(payload: Any, ctx: AttemptContext) -> None:
    await asyncio.sleep(0.3)


not_callable = 42
FUNCTIONS = [
    *("returns_payload", "raises", "interrupts", "exits", "unprintable", "returns_unprintable"),
    *("returns_raw_text", "returns_coroutine", "sleeps", "async_returns", "async_raises"),
    *("async_cancelled", "async_interrupts", "async_sleeps", "not_callable", "no_such_function"),
]


def python_targets() -> st.SearchStrategy[PythonTarget]:
    known = st.sampled_from(FUNCTIONS).map(f"{HERE}:{{}}".format)
    fuzzed = st.builds("cronwheel_fuzz.{}:{}".format, any_text, any_text)  # allowed, not importable
    return st.builds(PythonTarget, mostly(known, fuzzed | hostile_text))


def test_python_executor_answers_every_input(caplog: pytest.LogCaptureFixture) -> None:
    settings_ = WorkerSettings(python_allow=(f"{HERE}:*", "cronwheel_fuzz.*"), output_limit=16)
    executor = PythonExecutor(settings_, clock=ManualClock(NOW))
    with asyncio.Runner() as runner:

        @tuned(80)
        @given(target=python_targets(), ctx=contexts)
        @example(target=PythonTarget(f"{HERE}:interrupts"), ctx=CTX)
        @example(target=PythonTarget(f"{HERE}:unprintable"), ctx=CTX)
        @example(target=PythonTarget(f"{HERE}:returns_unprintable"), ctx=CTX)
        def attempt(target: PythonTarget, ctx: AttemptContext) -> None:
            check(run_in(runner, lambda: executor.execute(target, ctx)))

        try:
            attempt()
        finally:
            run_in(runner, executor.close)
    no_tracebacks(caplog)

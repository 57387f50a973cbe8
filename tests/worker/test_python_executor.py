"""PythonExecutor: allowlist, async and sync functions, exceptions, timeouts.

The target functions live in this module and are named by ``__name__``, so they are importable
under whatever name pytest gave the module.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from cronwheel.model import Outcome, PythonTarget
from cronwheel.worker.executors import AttemptContext, Executors, WorkerSettings
from cronwheel.worker.executors.python import PythonExecutor

HERE = __name__
ALLOW = WorkerSettings(python_allow=(f"{HERE}:allowed_*", f"{HERE}:Holder*", "cronwheel_no_such_module:*"))
SLOT = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
SYNTAX = "target.function must be 'package.module:function' (a dotted module path, then one function name)"
RELEASE = threading.Event()  # lets the blocked sync function go at the end of its test


def make_ctx(**changes: Any) -> AttemptContext:
    ctx = AttemptContext(
        execution_id="run-1",
        job_id="job-1",
        job_name="report",
        team="data",
        scheduled_at=SLOT,
        attempt=1,
        timeout_s=5.0,
        payload={"rows": 3},
    )
    return replace(ctx, **changes)


def fn(name: str) -> PythonTarget:
    return PythonTarget(function=f"{HERE}:{name}")


# -- target functions ----------------------------------------------------------------------------


async def allowed_async_echo(payload: Any, ctx: AttemptContext) -> str:
    await asyncio.sleep(0)
    return f"async {payload} attempt={ctx.attempt} run={ctx.execution_id}"


def allowed_sync_echo(payload: Any, ctx: AttemptContext) -> dict[str, Any]:
    return {"thread": threading.current_thread().name, "payload": payload, "job": ctx.job_id}


def allowed_returns_none(payload: Any, ctx: AttemptContext) -> None:
    return None


def allowed_big_result(payload: Any, ctx: AttemptContext) -> str:
    return "y" * 5000


def allowed_raises(payload: Any, ctx: AttemptContext) -> None:
    raise ValueError(f"bad rows: {payload['rows']}")


async def allowed_async_raises(payload: Any, ctx: AttemptContext) -> None:
    raise KeyError("missing")


def allowed_raises_timeout(payload: Any, ctx: AttemptContext) -> None:
    raise TimeoutError("upstream took too long")


def allowed_exits(payload: Any, ctx: AttemptContext) -> None:
    sys.exit(3)


async def allowed_async_sleeps(payload: Any, ctx: AttemptContext) -> None:
    await asyncio.sleep(30)


def allowed_sync_blocks(payload: Any, ctx: AttemptContext) -> str:
    RELEASE.wait(10)
    return "released"


def allowed_returns_coroutine(payload: Any, ctx: AttemptContext) -> Any:
    return allowed_async_echo(payload, ctx)


def allowed_interrupts(payload: Any, ctx: AttemptContext) -> None:
    raise KeyboardInterrupt


async def allowed_async_interrupts(payload: Any, ctx: AttemptContext) -> None:
    raise KeyboardInterrupt


async def allowed_raises_cancelled(payload: Any, ctx: AttemptContext) -> None:
    raise asyncio.CancelledError  # its own (say, an awaited task it cancelled): not the worker's


class _UnprintableError(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text")


def allowed_raises_unprintable(payload: Any, ctx: AttemptContext) -> None:
    raise _UnprintableError


def allowed_returns_unprintable(payload: Any, ctx: AttemptContext) -> _UnprintableError:
    return _UnprintableError()


def allowed_returns_raw_text(payload: Any, ctx: AttemptContext) -> str:
    return "a\0b\ud800"


def forbidden(payload: Any, ctx: AttemptContext) -> str:
    raise AssertionError("must never run")


allowed_not_callable = 42


class Holder:
    @staticmethod
    async def method(payload: Any, ctx: AttemptContext) -> str:
        return "static"


# -- tests ---------------------------------------------------------------------------------------


@pytest.fixture
async def executor() -> AsyncIterator[PythonExecutor]:
    ex = PythonExecutor(ALLOW)
    yield ex
    RELEASE.set()
    await ex.close()


async def test_async_function(executor: PythonExecutor) -> None:
    result = await executor.execute(fn("allowed_async_echo"), make_ctx(attempt=2))
    assert result.outcome is Outcome.SUCCESS
    assert result.output == "async {'rows': 3} attempt=2 run=run-1"
    assert result.error is None


async def test_sync_function_runs_on_a_worker_thread(executor: PythonExecutor) -> None:
    result = await executor.execute(fn("allowed_sync_echo"), make_ctx())
    assert result.outcome is Outcome.SUCCESS
    assert result.output is not None
    assert "cronwheel-python" in result.output
    assert "'payload': {'rows': 3}" in result.output
    assert "'job': 'job-1'" in result.output


async def test_an_attribute_path_is_refused(executor: PythonExecutor) -> None:
    """The API's schema refused ``mod:Holder.method``; the worker ran it (and so anything reachable
    from what an allowed module imported). Now both refuse it, with one message."""
    result = await executor.execute(fn("Holder.method"), make_ctx())
    assert result.outcome is Outcome.ERROR
    assert result.error == SYNTAX
    klass = await executor.execute(fn("Holder"), make_ctx())
    assert klass.outcome is Outcome.ERROR
    assert klass.error == f"{HERE}:Holder is not a function defined there (its type is type)"


async def test_sync_function_returning_a_coroutine(executor: PythonExecutor) -> None:
    result = await executor.execute(fn("allowed_returns_coroutine"), make_ctx())
    assert result.outcome is Outcome.SUCCESS
    assert result.output is not None
    assert result.output.startswith("async")


async def test_output(executor: PythonExecutor) -> None:
    none = await executor.execute(fn("allowed_returns_none"), make_ctx())
    assert none.outcome is Outcome.SUCCESS
    assert none.output is None
    big = await executor.execute(fn("allowed_big_result"), make_ctx())
    assert big.output == "y" * 1024


@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("allowed_raises", "ValueError: bad rows: 3"),
        ("allowed_async_raises", "KeyError: 'missing'"),
        ("allowed_exits", "SystemExit: 3"),
        ("allowed_raises_timeout", "TimeoutError: upstream took too long"),  # its own, not ours
    ],
)
async def test_exception_is_failure(executor: PythonExecutor, name: str, error: str) -> None:
    result = await executor.execute(fn(name), make_ctx())
    assert result.outcome is Outcome.FAILURE
    assert result.error == error
    assert result.output is not None
    assert "Traceback" in result.output or name in result.output


@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("allowed_interrupts", "KeyboardInterrupt: "),
        ("allowed_async_interrupts", "KeyboardInterrupt: "),
        ("allowed_raises_cancelled", "CancelledError: "),
        (
            "allowed_raises_unprintable",
            "_UnprintableError: <_UnprintableError object; str() raised RuntimeError>",
        ),
    ],
)
async def test_whatever_the_function_raises_is_its_failure(
    executor: PythonExecutor, name: str, error: str
) -> None:
    """Before, KeyboardInterrupt went through the worker's loop, and an exception whose str()
    raises made the executor raise."""
    result = await executor.execute(fn(name), make_ctx())
    assert (result.outcome, result.error) == (Outcome.FAILURE, error)


async def test_return_values_that_are_awkward_text() -> None:
    executors = Executors(ALLOW)
    try:
        unprintable = await executors.execute(fn("allowed_returns_unprintable"), make_ctx())
        raw = await executors.execute(fn("allowed_returns_raw_text"), make_ctx())
    finally:
        await executors.close()
    assert (unprintable.outcome, unprintable.output) == (
        Outcome.SUCCESS,
        "<_UnprintableError object; str() raised RuntimeError>",
    )
    assert (raw.outcome, raw.output) == (Outcome.SUCCESS, "a\ufffdb?")  # storable (see storable())


async def test_the_workers_cancellation_still_cancels(executor: PythonExecutor) -> None:
    attempt = asyncio.create_task(executor.execute(fn("allowed_async_sleeps"), make_ctx()))
    await asyncio.sleep(0.05)
    attempt.cancel()
    with pytest.raises(asyncio.CancelledError):
        await attempt


async def test_async_timeout_cancels(executor: PythonExecutor) -> None:
    started = time.monotonic()
    result = await executor.execute(fn("allowed_async_sleeps"), make_ctx(timeout_s=0.2))
    assert result.outcome is Outcome.TIMEOUT
    assert result.error == "timed out after 0.2 s"
    assert time.monotonic() - started < 0.6


async def test_sync_timeout_abandons_the_thread(executor: PythonExecutor) -> None:
    RELEASE.clear()
    started = time.monotonic()
    result = await executor.execute(fn("allowed_sync_blocks"), make_ctx(timeout_s=0.2))
    assert result.outcome is Outcome.TIMEOUT
    assert result.error is not None
    assert result.error.startswith("timed out after 0.2 s (a synchronous function cannot be stopped")
    assert time.monotonic() - started < 0.6
    RELEASE.set()


@pytest.mark.parametrize(
    ("function", "error"),
    [
        (
            f"{HERE}:forbidden",
            f"python target '{HERE}:forbidden' is not allowed by this server's --allow-python",
        ),
        (
            "os:system",
            "python target 'os:system' is not allowed: os is in the standard library, never a target",
        ),
        ("no_colon_here", SYNTAX),
        ("mod:fn; import os", SYNTAX),
        (f"{HERE}:__class__", SYNTAX),
    ],
)
async def test_refused(executor: PythonExecutor, function: str, error: str) -> None:
    result = await executor.execute(PythonTarget(function=function), make_ctx())
    assert result.outcome is Outcome.ERROR
    assert result.error == error


async def test_nothing_allowed_by_default() -> None:
    executors = Executors()
    result = await executors.execute(fn("allowed_async_echo"), make_ctx())
    await executors.close()
    assert result.outcome is Outcome.ERROR
    assert result.error is not None
    assert "not allowed" in result.error


async def test_import_errors() -> None:
    ex = PythonExecutor(ALLOW)
    try:
        missing = await ex.execute(PythonTarget("cronwheel_no_such_module:fn"), make_ctx())
        no_attr = await ex.execute(fn("allowed_no_such_function"), make_ctx())
        not_callable = await ex.execute(fn("allowed_not_callable"), make_ctx())
    finally:
        await ex.close()
    assert missing.outcome is Outcome.ERROR
    assert missing.error == (
        "cannot import cronwheel_no_such_module: "
        "ModuleNotFoundError: No module named 'cronwheel_no_such_module'"
    )
    assert no_attr.outcome is Outcome.ERROR
    assert (
        no_attr.error == f"{HERE}:allowed_no_such_function: {HERE} has no function allowed_no_such_function"
    )
    assert not_callable.outcome is Outcome.ERROR
    assert (
        not_callable.error == f"{HERE}:allowed_not_callable is not a function defined there (its type is int)"
    )


async def test_functions_are_cached(executor: PythonExecutor) -> None:
    for _ in range(3):
        assert (await executor.execute(fn("allowed_async_echo"), make_ctx())).outcome is Outcome.SUCCESS
    assert list(executor._functions) == [f"{HERE}:allowed_async_echo"]


async def test_output_beyond_the_excerpt_is_kept_up_to_the_tail_bound(executor: PythonExecutor) -> None:
    big = await executor.execute(fn("allowed_big_result"), make_ctx())
    assert big.output_tail == "y" * 5000  # under the default 64 KiB
    small = await executor.execute(fn("allowed_sync_echo"), make_ctx())
    assert small.output_tail is None
    bounded = PythonExecutor(replace(ALLOW, output_tail_bytes=2000))
    try:
        cut = await bounded.execute(fn("allowed_big_result"), make_ctx())
    finally:
        await bounded.close()
    assert cut.output_tail == "y" * 2000

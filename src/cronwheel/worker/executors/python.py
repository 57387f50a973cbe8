"""Python function targets: ``"package.module:function"`` called in the worker's own process.

Only functions that :mod:`cronwheel.targets.python` allows may run, the rule the API applied when
the job was written, checked again here before every call: the reference matches one of
``WorkerSettings.python_allow`` (fnmatch patterns on the whole ``"module:function"`` string) and
names a plain function *defined in* that module, not one it imported (``mypkg.jobs:rmtree`` from
``shutil``), a builtin, a class or any other callable; never the standard library's nor
cronwheel's. Modules are imported once and cached.

The function is called as ``function(payload, ctx)`` with the JSON payload and the
:class:`~cronwheel.worker.executors.base.AttemptContext`.

* A coroutine function is awaited in the worker's event loop; on timeout it is cancelled.
* A plain function runs on a thread of the executor's own pool (not the loop's default pool,
  which aiohttp's DNS lookups share). **A thread cannot be killed**: on timeout the attempt is
  recorded TIMEOUT and the call is *abandoned*, it runs on in the background until it returns by
  itself, holding its thread (and delaying interpreter exit). Functions that may hang should be
  async, or be command targets, which are killed for real.

The return value, if not None, is kept as the attempt's output (``str(value)``, cut to
``output_limit`` characters). An exception is a FAILURE with ``"ExcType: message"`` as the error
and the traceback's tail as the output: any exception, ``KeyboardInterrupt``, ``SystemExit`` and a
``CancelledError`` the function raised itself included (only the worker's cancellation of the
attempt propagates), and a ``str()`` that raises is reported, not raised: the function's faults
are its attempt's outcome, never the worker's exception.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import functools
import importlib
import inspect
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from cronwheel.clock import Clock, SystemClock
from cronwheel.model import AttemptResult, Outcome, PythonTarget
from cronwheel.targets import python as python_targets
from cronwheel.worker.executors.base import AttemptContext, WorkerSettings

TargetFunction = Callable[[Any, AttemptContext], Any]


class _ImportFailedError(Exception):
    pass


class PythonExecutor:
    """Calls allow-listed Python functions in this process."""

    def __init__(
        self,
        settings: WorkerSettings | None = None,
        *,
        clock: Clock | None = None,
        max_threads: int = 16,
    ) -> None:
        self._settings = settings or WorkerSettings()
        self._clock: Clock = clock or SystemClock()
        self._max_threads = max_threads
        self._pool: ThreadPoolExecutor | None = None
        self._functions: dict[str, TargetFunction] = {}

    async def close(self) -> None:
        """Stop the thread pool without waiting for abandoned calls (they run on unobserved)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    async def execute(self, target: PythonTarget, ctx: AttemptContext) -> AttemptResult:
        reference = target.function
        problem = self._refusal(target)
        if problem is not None:
            return AttemptResult(Outcome.ERROR, error=problem)
        budget = ctx.budget_s(self._clock.now())
        if budget <= 0:
            return AttemptResult(Outcome.TIMEOUT, error="the attempt's deadline passed before it started")
        deadline = asyncio.timeout(budget)
        raised: BaseException
        try:
            async with deadline:
                function = await self._load(reference)
                value = await self._call(function, ctx)
        except TimeoutError as exc:
            if deadline.expired():
                return AttemptResult(Outcome.TIMEOUT, error=self._timeout_text(reference, budget))
            raised = exc  # the function raised TimeoutError itself: its failure, not a timeout
        except _ImportFailedError as exc:
            return AttemptResult(Outcome.ERROR, error=str(exc))
        except asyncio.CancelledError as exc:
            if _being_cancelled():  # the worker ends the attempt
                raise
            raised = exc  # the function raised it itself
        except BaseException as exc:  # the function's failure, not the worker's (KeyboardInterrupt too)
            raised = exc
        else:
            return self._success(value)
        failed = _failure(raised, self._settings.output_limit)
        return dataclasses.replace(failed, output_tail=self._tail(failed.output_tail or ""))

    def _success(self, value: Any) -> AttemptResult:
        """SUCCESS, with the return value (if not None) as the output."""
        if value is None:
            return AttemptResult(Outcome.SUCCESS)
        text, limit = _text(value), self._settings.output_limit
        return AttemptResult(Outcome.SUCCESS, output=text[:limit], output_tail=self._tail(text))

    def _tail(self, text: str) -> str | None:
        """The last ``output_tail_bytes`` characters of a text longer than the excerpt."""
        if len(text) <= self._settings.output_limit:
            return None
        return text[-self._settings.output_tail_bytes :] if self._settings.output_tail_bytes > 0 else None

    def _refusal(self, target: PythonTarget) -> str | None:
        """The API's refusal (:func:`cronwheel.targets.python.refusal`), for jobs stored before
        it refused them or under other options."""
        return python_targets.refusal(target.function, self._settings.python_allow)

    def _timeout_text(self, reference: str, budget: float) -> str:
        function = self._functions.get(reference)
        text = f"timed out after {budget:g} s"
        if function is not None and not _is_async(function):
            text += " (a synchronous function cannot be stopped: it was abandoned and may still be running)"
        return text

    async def _load(self, reference: str) -> TargetFunction:
        function = self._functions.get(reference)
        if function is None:
            # importing runs module code: keep it off the event loop
            function = await self._run_in_thread(_import, reference)
            self._functions[reference] = function
        return function

    async def _call(self, function: TargetFunction, ctx: AttemptContext) -> Any:
        if _is_async(function):
            return await function(ctx.payload, ctx)
        value = await self._run_in_thread(function, ctx.payload, ctx)
        if inspect.isawaitable(value):  # e.g. a plain function returning a coroutine
            value = await value
        return value

    async def _run_in_thread(self, function: Callable[..., Any], *args: Any) -> Any:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self._max_threads, thread_name_prefix="cronwheel-python")
        context = contextvars.copy_context()
        call = functools.partial(context.run, function, *args)
        return await asyncio.get_running_loop().run_in_executor(self._pool, call)


def _import(reference: str) -> TargetFunction:
    module_name, _, name = reference.partition(":")
    try:
        module = importlib.import_module(module_name)
    except BaseException as exc:  # module code ran: SystemExit and the like are its failure too
        raise _ImportFailedError(f"cannot import {module_name}: {_describe(exc)}") from exc
    found = python_targets.function_in(module, name)
    if isinstance(found, str):
        raise _ImportFailedError(found)
    function: TargetFunction = found
    return function


def _is_async(function: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(function)


def _being_cancelled() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _failure(exc: BaseException, limit: int) -> AttemptResult:
    """FAILURE with ``"ExcType: message"`` and the tail of the traceback as output."""
    try:
        trace = "".join(traceback.format_exception(exc))
    except BaseException:  # an exception object broken enough to break traceback
        trace = _describe(exc)
    # the whole traceback rides in ``output_tail`` until the executor cuts it to its bound
    return AttemptResult(
        Outcome.FAILURE, error=_describe(exc), output=trace[-limit:] if limit > 0 else "", output_tail=trace
    )


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {_text(exc)}"


def _text(value: object) -> str:
    """``str(value)``; the target's own ``__str__`` may raise, which is its failure to report, not
    the worker's."""
    try:
        return str(value)
    except BaseException as exc:
        return f"<{type(value).__name__} object; str() raised {type(exc).__name__}>"

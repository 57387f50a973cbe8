"""Traces of runs (OpenTelemetry), off by default: the one interface the roles use.

A run's trace starts when its slot is fired (``cronwheel.fire``, or when ``POST .../trigger``
creates it, continuing the caller's ``traceparent``); its W3C trace context is recorded on the
run (``runs.traceparent``), so the worker that claims it, on any machine, adds its
``cronwheel.claim`` and ``cronwheel.attempt`` spans to the same trace, and an HTTP attempt sends
the attempt span's ``traceparent`` to the target. docs/operations.md, "Logs and traces", lists
every span and attribute.

The roles hold a :class:`Tracer`. With tracing off it is :data:`OFF`: ``enabled`` is False, the
fire path checks that attribute once per batch and does nothing else, and OpenTelemetry is never
imported. With ``--tracing otlp|console``, :func:`start` imports :mod:`cronwheel.telemetry.tracing.otel`
(the SDK: the ``cronwheel[otel]`` extra) and returns its tracer. A span's times are the role's
clock readings (``at``), so a trace is on the same time base as the run's record.

Never put secrets in attributes: no payloads, headers, URLs, errors or outputs (those are in the
run's record, behind the API's team walls); ids, the slot, the team, numbers and outcomes only.
"""

from __future__ import annotations

import contextlib
import importlib.util
import re
from collections.abc import AsyncIterator, Iterator, Sequence
from datetime import datetime

from cronwheel.clock import Clock
from cronwheel.errors import PermanentError
from cronwheel.telemetry.tracing.port import MODES, Attribute, Attributes, Span, SpanKind, TraceMode, Tracer

__all__ = [
    "MODES",
    "NO_SPAN",
    "OFF",
    "Attribute",
    "Attributes",
    "Span",
    "SpanKind",
    "TraceMode",
    "Tracer",
    "check",
    "ending",
    "started",
    "trace_id",
]

# W3C Trace Context, version 00 and the fields later versions keep (https://www.w3.org/TR/trace-context/)
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")
_ZERO_TRACE, _ZERO_SPAN = "0" * 32, "0" * 16
EXTRA = "cronwheel[otel]"  # the package extra that brings the SDK and the OTLP exporter


class _NoSpan:
    __slots__ = ()
    traceparent = None

    def headers(self) -> tuple[tuple[str, str], ...]:
        return ()

    def set(self, attributes: Attributes) -> None:
        pass

    def fail(self, description: str) -> None:
        pass

    def end(self, at: datetime) -> None:
        pass


NO_SPAN: Span = _NoSpan()


class _Off:
    """Tracing off: no spans, nothing imported, nothing recorded."""

    __slots__ = ()
    enabled = False

    def start(
        self,
        name: str,
        at: datetime,
        *,
        parent: str | None = None,
        state: str | None = None,
        kind: SpanKind = "internal",
        attributes: Attributes | None = None,
        links: Sequence[Span] = (),
    ) -> Span:
        return NO_SPAN

    async def close(self) -> None:
        pass


OFF: Tracer = _Off()


@contextlib.contextmanager
def ending(span: Span, clock: Clock) -> Iterator[Span]:
    """``span``, ended when the block is left (by ``clock``); an exception makes it an error."""
    try:
        yield span
    except BaseException as error:
        span.fail(type(error).__name__)
        raise
    finally:
        span.end(clock.now())


def trace_id(traceparent: str | None) -> str | None:
    """The trace id (32 lowercase hex digits) of a valid W3C ``traceparent``, else None."""
    if traceparent is None:
        return None
    match = _TRACEPARENT.fullmatch(traceparent)
    if match is None:
        return None
    version, trace, span, _, rest = match.groups()
    if version == "ff" or (version == "00" and rest) or trace == _ZERO_TRACE or span == _ZERO_SPAN:
        return None
    return trace


def check(mode: TraceMode) -> None:
    """Refuse a mode this installation cannot serve, without importing anything."""
    if mode not in MODES:
        raise PermanentError(f"--tracing must be one of {', '.join(MODES)}, not {mode!r}")
    if mode == "off":
        return
    wanted = ["opentelemetry.sdk.trace"]
    if mode == "otlp":
        wanted.append("opentelemetry.exporter.otlp.proto.http.trace_exporter")
    for module in wanted:
        if not _importable(module):
            raise PermanentError(
                f"--tracing {mode} needs the OpenTelemetry SDK and its OTLP exporter, which are not "
                f"installed: pip install '{EXTRA}' (no {module})"
            )


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


@contextlib.asynccontextmanager
async def started(mode: TraceMode, node: str, roles: Sequence[str]) -> AsyncIterator[Tracer]:
    """This node's tracer for ``mode`` (:data:`OFF` for off), closed on exit. Checks ``mode``
    first (:func:`check`)."""
    check(mode)
    if mode == "off":
        yield OFF
        return
    from cronwheel.telemetry.tracing import otel  # noqa: PLC0415 - the SDK only when tracing is on

    tracer = otel.exporting(mode, node, roles)
    try:
        yield tracer
    finally:
        await tracer.close()

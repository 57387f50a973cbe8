"""The OpenTelemetry SDK behind :class:`cronwheel.telemetry.tracing.Tracer` (``--tracing otlp|console``).

Imported only when tracing is on. The tracer provider is this module's own, never the global
one: FastAPI (0.165+) traces every request of its app through the global provider once one is
set, and the API's requests (their paths and query strings) are not what these traces are for.
The SDK's environment applies as usual: ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``), ``OTEL_EXPORTER_OTLP_HEADERS``, ``..._TIMEOUT``,
``..._CERTIFICATE``, ``OTEL_TRACES_SAMPLER`` and its argument, ``OTEL_BSP_*``,
``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` (both over cronwheel's defaults: service
``cronwheel``, the node as ``service.instance.id``, its roles as ``cronwheel.roles``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import OTELResourceDetector, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.trace import Link, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from cronwheel import __version__
from cronwheel.telemetry.tracing.port import Attributes, Span, TraceMode
from cronwheel.telemetry.tracing.port import SpanKind as Kind

log = logging.getLogger("cronwheel.tracing")

_PROPAGATOR = TraceContextTextMapPropagator()
_KINDS: dict[Kind, SpanKind] = {
    "internal": SpanKind.INTERNAL,
    "producer": SpanKind.PRODUCER,
    "consumer": SpanKind.CONSUMER,
    "client": SpanKind.CLIENT,
}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
CLOSE_S = 5.0  # at most this long to export what is left when the node stops


def _nanos(at: datetime) -> int:
    return (at - _EPOCH) // _MICROSECOND * 1000


def _kept(attributes: Attributes | None) -> dict[str, str | int | float | bool]:
    return {} if attributes is None else {k: v for k, v in attributes.items() if v is not None}


class OtelSpan:
    __slots__ = ("_span",)

    def __init__(self, span: trace.Span) -> None:
        self._span = span

    @property
    def context(self) -> trace.SpanContext:
        return self._span.get_span_context()

    @property
    def traceparent(self) -> str | None:
        context = self.context
        if not context.is_valid:  # the SDK is disabled (OTEL_SDK_DISABLED)
            return None
        return f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"

    def headers(self) -> tuple[tuple[str, str], ...]:
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier, trace.set_span_in_context(self._span, Context()))
        return tuple(carrier.items())

    def set(self, attributes: Attributes) -> None:
        self._span.set_attributes(_kept(attributes))

    def fail(self, description: str) -> None:
        self._span.set_status(Status(StatusCode.ERROR, description))

    def end(self, at: datetime) -> None:
        self._span.end(_nanos(at))


class OtelTracer:
    """Spans of one ``TracerProvider``, which :meth:`close` shuts down."""

    enabled = True

    def __init__(self, provider: TracerProvider) -> None:
        self._provider = provider
        self._tracer = provider.get_tracer("cronwheel", __version__)

    def start(
        self,
        name: str,
        at: datetime,
        *,
        parent: str | None = None,
        state: str | None = None,
        kind: Kind = "internal",
        attributes: Attributes | None = None,
        links: Sequence[Span] = (),
    ) -> OtelSpan:
        context = Context()  # never the ambient one: a span's parent is what the caller names
        if parent is not None:
            carrier = {"traceparent": parent}
            if state is not None:
                carrier["tracestate"] = state
            context = _PROPAGATOR.extract(carrier, context)
        linked = [Link(one.context) for one in links if isinstance(one, OtelSpan) and one.context.is_valid]
        span = self._tracer.start_span(
            name, context, _KINDS[kind], _kept(attributes), linked, start_time=_nanos(at)
        )
        return OtelSpan(span)

    async def close(self) -> None:
        """Shut the provider down (its exporter sends what is queued), waiting at most
        :data:`CLOSE_S`: a collector that does not answer must not hold the node's exit. The
        shutdown runs in a daemon thread of its own, not the loop's executor, which
        ``asyncio.run`` would wait for (the exporter's own timeout, 10 s, and its retries)."""
        loop = asyncio.get_running_loop()
        done = loop.create_future()

        def shutdown() -> None:
            try:
                self._provider.shutdown()
            finally:
                _tell(loop, done)

        threading.Thread(target=shutdown, name="cronwheel-trace-shutdown", daemon=True).start()
        try:
            await asyncio.wait_for(done, CLOSE_S)
        except TimeoutError:
            busy = f"the exporter was still busy after {CLOSE_S} s"
            log.warning("traces not exported", extra={"action": "trace_export", "error": busy})


def _settle(done: asyncio.Future[None]) -> None:
    if not done.done():
        done.set_result(None)


def _tell(loop: asyncio.AbstractEventLoop, done: asyncio.Future[None]) -> None:
    with contextlib.suppress(RuntimeError):  # the loop is gone: the node stopped without waiting
        loop.call_soon_threadsafe(_settle, done)


def resource(node: str, roles: Sequence[str]) -> Resource:
    """cronwheel's resource attributes, under what ``OTEL_SERVICE_NAME`` and
    ``OTEL_RESOURCE_ATTRIBUTES`` say."""
    own = {
        "service.name": "cronwheel",
        "service.version": __version__,
        "service.instance.id": node,
        "cronwheel.roles": ",".join(roles),
    }
    return Resource.create(own).merge(OTELResourceDetector().detect())


def exporter(mode: TraceMode) -> SpanExporter:
    if mode == "console":
        return ConsoleSpanExporter()  # JSON per span on stdout
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: PLC0415

    return OTLPSpanExporter()  # OTEL_EXPORTER_OTLP_* from the environment


def provider_for(node: str, roles: Sequence[str]) -> TracerProvider:
    """A provider with cronwheel's resource and the SDK's sampler (``OTEL_TRACES_SAMPLER``);
    shut down by its tracer's :meth:`~OtelTracer.close`, not at interpreter exit."""
    return TracerProvider(resource=resource(node, roles), shutdown_on_exit=False)


def exporting(mode: TraceMode, node: str, roles: Sequence[str]) -> OtelTracer:
    """The tracer of ``--tracing otlp|console``: spans batched to the mode's exporter."""
    provider = provider_for(node, roles)
    provider.add_span_processor(BatchSpanProcessor(exporter(mode)))
    return OtelTracer(provider)

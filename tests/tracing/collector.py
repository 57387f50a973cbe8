"""A stand-in for an OpenTelemetry collector on loopback: it takes OTLP/HTTP trace exports
(``POST /v1/traces``, protobuf) and decodes them with opentelemetry-proto, for the tests that run
real cronwheel processes with ``--tracing otlp``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span


@dataclass
class Collector:
    """Keeps every export it is sent."""

    url: str = ""
    exports: list[ExportTraceServiceRequest] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.Response:
        assert request.content_type == "application/x-protobuf"
        export = ExportTraceServiceRequest()
        export.ParseFromString(await request.read())
        self.exports.append(export)
        return web.Response(content_type="application/x-protobuf", body=b"")

    def spans(self) -> list[tuple[dict[str, Any], Span]]:
        """Every span received, with its resource's attributes."""
        return [
            (attributes(resource.resource.attributes), span)
            for export in self.exports
            for resource in export.resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
        ]

    def trace(self, trace_id: str) -> list[tuple[dict[str, Any], Span]]:
        """The spans of one trace (32 hex digits)."""
        return [(resource, span) for resource, span in self.spans() if span.trace_id.hex() == trace_id]


def attributes(pairs: Any) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for pair in pairs:
        assert isinstance(pair, KeyValue)
        found[pair.key] = getattr(pair.value, pair.value.WhichOneof("value") or "string_value")
    return found


@asynccontextmanager
async def collecting() -> AsyncIterator[Collector]:
    """A collector serving on 127.0.0.1 (a free port) until the block ends."""
    received = Collector()
    app = web.Application()
    app.router.add_post("/v1/traces", received.handle)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    received.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        yield received
    finally:
        await runner.cleanup()

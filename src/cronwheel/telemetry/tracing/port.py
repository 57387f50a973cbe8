"""The tracing port: :class:`Tracer` and the :class:`Span` it starts, as the roles use them. The
backends: :mod:`cronwheel.telemetry.tracing` (off) and :mod:`cronwheel.telemetry.tracing.otel`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Literal, Protocol

TraceMode = Literal["off", "otlp", "console"]
MODES: tuple[TraceMode, ...] = ("off", "otlp", "console")
SpanKind = Literal["internal", "producer", "consumer", "client"]
Attribute = str | int | float | bool | None  # None: left out
Attributes = Mapping[str, Attribute]


class Span(Protocol):
    """One span, started by :meth:`Tracer.start` and ended once by :meth:`end`."""

    @property
    def traceparent(self) -> str | None:
        """This span as a W3C ``traceparent`` (its children's parent); None when not traced."""
        ...

    def headers(self) -> tuple[tuple[str, str], ...]:
        """What a request made inside this span carries: ``traceparent`` (and ``tracestate``)."""
        ...

    def set(self, attributes: Attributes) -> None:
        """Add attributes (a None value is left out)."""
        ...

    def fail(self, description: str) -> None:
        """Mark the span's status as an error (``description``: no secrets)."""
        ...

    def end(self, at: datetime) -> None: ...


class Tracer(Protocol):
    @property
    def enabled(self) -> bool:
        """False: every span is :data:`NO_SPAN` (callers may skip building them)."""
        ...

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
        """A span started ``at``: a child of ``parent`` (a W3C ``traceparent``, with its
        ``tracestate``), or the root of a new trace when there is none or it is not valid."""
        ...

    async def close(self) -> None:
        """Export what is left (bounded in time) and stop."""
        ...

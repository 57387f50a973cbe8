"""How tracing is turned on and off: the W3C traceparent read back, the mode checked (a missing
SDK named by its extra), cronwheel's resource under the SDK's environment, bounded shutdown."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from cronwheel.cli import cli
from cronwheel.clock import ManualClock
from cronwheel.errors import PermanentError
from cronwheel.telemetry.tracing import NO_SPAN, OFF, check, ending, otel, started, trace_id
from cronwheel.telemetry.tracing.otel import OtelTracer, provider_for

AT = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
VALID = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.mark.parametrize(
    ("traceparent", "expected"),
    [
        (VALID, "4bf92f3577b34da6a3ce929d0e0e4736"),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03", "4bf92f3577b34da6a3ce929d0e0e4736"),
        ("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-later", "4bf92f3577b34da6a3ce929d0e0e4736"),
        (None, None),
        ("", None),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-more", None),  # version 00 has 4 fields
        ("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", None),  # the forbidden version
        ("00-00000000000000000000000000000000-00f067aa0ba902b7-01", None),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", None),
        ("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", None),  # lowercase only
        ("00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01", None),
    ],
)
def test_trace_id_reads_only_valid_traceparents(traceparent: str | None, expected: str | None) -> None:
    assert trace_id(traceparent) == expected


def test_tracing_off_is_the_no_op_tracer() -> None:
    assert not OFF.enabled
    span = OFF.start("cronwheel.fire", AT, parent=VALID)
    assert span is NO_SPAN
    assert span.traceparent is None
    assert span.headers() == ()


async def test_started_off_opens_nothing_and_console_exports() -> None:
    async with started("off", "n1", ("worker",)) as tracer:
        assert tracer is OFF
    async with started("console", "n1", ("worker",)) as tracer:
        assert tracer.enabled
        span = tracer.start("cronwheel.fire", AT)
        assert trace_id(span.traceparent) is not None
        span.end(AT)


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(PermanentError, match="--tracing must be one of off, otlp, console"):
        check("zipkin")  # type: ignore[arg-type]


@pytest.mark.parametrize("command", ["server", "api", "scheduler", "worker"])
def test_a_bad_tracing_option_is_a_usage_error(command: str) -> None:
    result = CliRunner().invoke(cli, [command, "--tracing", "jaeger"])
    assert result.exit_code == 2
    assert "Invalid value for '--tracing'" in result.output


_WITHOUT_SDK = """
import sys
class Hide:
    def find_spec(self, name, path=None, target=None):
        if name.startswith(("opentelemetry.sdk", "opentelemetry.exporter")):
            raise ModuleNotFoundError(name)
        return None
sys.meta_path.insert(0, Hide())
from cronwheel.cli import main
main()
"""


@pytest.mark.parametrize("mode", ["otlp", "console"])
def test_tracing_without_the_sdk_stops_the_node_naming_the_extra(mode: str, tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path / 'c.db'}"
    command = [sys.executable, "-c", _WITHOUT_SDK, "server", "--port", "0", "--database-url", database]
    done = subprocess.run(
        [*command, "--tracing", mode], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 2, done.stderr
    assert f"error: --tracing {mode} needs the OpenTelemetry SDK" in done.stderr
    assert "pip install 'cronwheel[otel]'" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "c.db").exists()  # refused before anything was opened


def test_the_resource_names_cronwheel_and_the_node(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    attributes = otel.resource("node-7", ("scheduler", "worker")).attributes
    assert attributes["service.name"] == "cronwheel"
    assert attributes["service.instance.id"] == "node-7"
    assert attributes["cronwheel.roles"] == "scheduler,worker"
    monkeypatch.setenv("OTEL_SERVICE_NAME", "cron-prod")
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "service.instance.id=pod-3,region=eu")
    attributes = otel.resource("node-7", ("worker",)).attributes
    assert attributes["service.name"] == "cron-prod"  # the operator's environment wins
    assert attributes["service.instance.id"] == "pod-3"
    assert attributes["region"] == "eu"


def test_a_disabled_sdk_records_no_trace_context(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    span = OtelTracer(provider_for("n1", ("worker",))).start("cronwheel.fire", AT)
    assert span.traceparent is None  # not an all-zero traceparent on the run
    assert span.headers() == ()


def test_a_child_of_an_invalid_parent_is_a_new_root() -> None:
    exporter = InMemorySpanExporter()
    provider = provider_for("n1", ("api",))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = OtelTracer(provider)
    tracer.start("a", AT, parent="00-zz").end(AT)
    tracer.start("b", AT, parent=VALID, state="vendor=1").end(AT)
    orphan, child = exporter.get_finished_spans()
    assert orphan.parent is None
    assert child.parent is not None
    assert f"{child.parent.span_id:016x}" == "00f067aa0ba902b7"


def test_ending_ends_the_span_and_marks_an_error() -> None:
    exporter = InMemorySpanExporter()
    provider = provider_for("n1", ("worker",))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer, clock = OtelTracer(provider), ManualClock(AT)

    def fail() -> None:
        with ending(tracer.start("x", AT), clock):
            clock.advance(1.5)
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        fail()
    [span] = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "RuntimeError"  # the type, never the message
    assert span.end_time is not None
    assert span.start_time is not None
    assert span.end_time - span.start_time == 1_500_000_000


class _Stuck(SpanProcessor):
    """A processor whose shutdown hangs, as an exporter does when its collector never answers."""

    def on_end(self, span: ReadableSpan) -> None:
        pass

    def shutdown(self) -> None:
        time.sleep(1.0)


async def test_closing_waits_for_the_exporter_only_so_long(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(otel, "CLOSE_S", 0.1)
    provider = provider_for("n1", ("worker",))
    provider.add_span_processor(_Stuck())
    loop = asyncio.get_running_loop()
    began = loop.time()
    with caplog.at_level(logging.WARNING, "cronwheel.tracing"):
        await OtelTracer(provider).close()
    assert loop.time() - began < 0.8
    assert [record.action for record in caplog.records] == ["trace_export"]  # type: ignore[attr-defined]
    await asyncio.sleep(1.0)  # let the stuck shutdown end before the test does

"""`cronwheel server` with its logs and traces as an operator turns them on: JSON log lines, a
node that never imports the OpenTelemetry SDK with tracing off, and a real OTLP/HTTP export of a
run's trace (decoded with opentelemetry-proto) to a collector stand-in on loopback."""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_harness import ServerProcess, Sink, wait_for

from tracing.collector import Collector, collecting

pytestmark = pytest.mark.integration

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER = f"00-{CALLER_TRACE}-00f067aa0ba902b7-01"
PIPELINE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
IMPORTED = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)\s*$")


@pytest.fixture
async def collector() -> AsyncIterator[Collector]:
    async with collecting() as received:
        yield received


@pytest.fixture
def node(tmp_path: Path) -> Iterator[list[ServerProcess]]:
    started: list[ServerProcess] = []
    yield started
    for server in started:
        server.stop()


def start(started: list[ServerProcess], tmp_path: Path, env: dict[str, str], *args: str) -> ServerProcess:
    server = ServerProcess(
        tmp_path / "cronwheel.db", ("--allow-network", "127.0.0.0/8", *args), tmp_path / "server.log"
    )
    clean = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    server.start(env={**clean, **env})
    started.append(server)
    return server


async def _job(api: httpx.AsyncClient, url: str, schedule: str) -> str:
    body = {"team": "it", "name": "traced", "schedule": schedule, "target": {"type": "http", "url": url}}
    response = await api.post("/v1/jobs", json=body)
    assert response.status_code == 201, response.text
    job_id: str = response.json()["id"]
    return job_id


async def _finished(api: httpx.AsyncClient, run_id: str) -> dict[str, Any] | None:
    run: dict[str, Any] = (await api.get(f"/v1/runs/{run_id}")).json()
    return run if run["state"] == "SUCCESS" else None


async def test_with_tracing_off_a_node_never_imports_the_sdk_and_logs_json(
    node: list[ServerProcess], tmp_path: Path, sink: Sink
) -> None:
    env = {"PYTHONPROFILEIMPORTTIME": "1"}  # the interpreter reports every import, lazy ones too
    server = start(node, tmp_path, env, "--log-format", "json", "--tracing", "off")
    async with server.client() as api:
        job = await _job(api, sink.answer("/off", (200, 0)), "* * * * * *")  # every second
        triggered = await api.post(f"/v1/jobs/{job}/trigger", headers={"traceparent": CALLER})
        manual = await wait_for(lambda: _finished(api, triggered.json()["id"]), timeout=10)
        await wait_for(lambda: len(sink.at("/off")) >= 3, timeout=10)  # scheduled fires too
        runs = (await api.get(f"/v1/jobs/{job}/runs")).json()["items"]
    assert await asyncio.to_thread(server.stop) == 0
    assert manual["trace_id"] is None  # the caller's traceparent is ignored with tracing off
    assert {run["trace_id"] for run in runs} == {None}
    assert all("traceparent" not in {key.lower() for key in d.headers} for d in sink.at("/off"))

    lines = server.log.read_text().splitlines()
    imported = {match.group(1) for line in lines if (match := IMPORTED.match(line))}
    assert "cronwheel.scheduler.loop" in imported  # the report is there: it names what was loaded
    assert "cronwheel.telemetry.tracing" in imported
    assert not {name for name in imported if name.startswith("opentelemetry.sdk")}
    assert not {name for name in imported if name.startswith("opentelemetry.exporter")}
    assert "cronwheel.telemetry.tracing.otel" not in imported

    facts = [json.loads(line) for line in lines if line.startswith("{")]
    assert facts, "no JSON log line"
    assert all(list(fact)[:4] == ["ts", "level", "logger", "msg"] for fact in facts)
    assert any(fact.get("action") in {"fire_batch", "arm_batch"} for fact in facts)  # armed by default
    assert any(fact.get("action") == "token_file" for fact in facts)
    assert not [line for line in lines if line.startswith(("ts=", "Traceback"))]  # no logfmt, no crash


async def test_a_triggered_runs_trace_is_exported_over_otlp(
    node: list[ServerProcess], tmp_path: Path, sink: Sink, collector: Collector
) -> None:
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url,
        "OTEL_BSP_SCHEDULE_DELAY": "100",  # ms between batches (default 5 s)
        "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment.name=it",
    }
    server = start(node, tmp_path, env, "--tracing", "otlp", "--node-id", "it-node")
    async with server.client() as api:
        job = await _job(api, sink.answer("/on", (200, 0)), "0 0 1 1 *")  # only the trigger fires
        triggered = await api.post(f"/v1/jobs/{job}/trigger", headers={"traceparent": CALLER})
        assert triggered.status_code == 201, triggered.text
        assert triggered.json()["trace_id"] == CALLER_TRACE
        await wait_for(lambda: _finished(api, triggered.json()["id"]), timeout=10)
    # a pipeline's CLI call, in the pipeline's trace (TRACEPARENT, as CI tracing tools export it)
    token = server.token_file.read_text().strip()
    command = [sys.executable, "-m", "cronwheel", "jobs", "trigger", "it/traced", "-o", "json"]
    cli = subprocess.run(
        [*command, "--url", server.url, "--token", token],
        env={**os.environ, "TRACEPARENT": PIPELINE},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout)["trace_id"] == PIPELINE.split("-")[1]

    def names() -> set[str] | None:
        seen = {span.name for _, span in collector.spans() if span.trace_id.hex() == CALLER_TRACE}
        return seen if {"cronwheel.fire", "cronwheel.claim", "cronwheel.attempt"} <= seen else None

    await wait_for(names, timeout=10)
    assert await asyncio.to_thread(server.stop) == 0  # the collector (on this loop) answers meanwhile
    traced = [(resource, span) for resource, span in collector.spans() if span.trace_id.hex() == CALLER_TRACE]
    spans = {span.name: (resource, span) for resource, span in traced}
    resource, fire = spans["cronwheel.fire"]
    assert resource["service.name"] == "cronwheel"
    assert resource["service.instance.id"] == "it-node"
    assert resource["cronwheel.roles"] == "api,scheduler,worker"
    assert resource["deployment.environment.name"] == "it"  # OTEL_RESOURCE_ATTRIBUTES applies
    assert fire.parent_span_id.hex() == "00f067aa0ba902b7"  # the caller's span
    _, attempt = spans["cronwheel.attempt"]
    assert attempt.parent_span_id == fire.span_id
    sent = [{key.lower(): value for key, value in d.headers.items()}["traceparent"] for d in sink.at("/on")]
    assert [CALLER_TRACE, attempt.span_id.hex()] in [header.split("-")[1:3] for header in sent]


async def test_a_collector_that_never_answers_does_not_hold_the_nodes_exit(
    node: list[ServerProcess], tmp_path: Path, sink: Sink
) -> None:
    with socket.socket() as hole:  # connections are accepted by the kernel, never answered
        hole.bind(("127.0.0.1", 0))
        hole.listen(64)
        env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{hole.getsockname()[1]}",
            "OTEL_EXPORTER_OTLP_TIMEOUT": "60",  # seconds the exporter would wait for an answer
            "OTEL_BSP_SCHEDULE_DELAY": "100",
        }
        server = start(node, tmp_path, env, "--tracing", "otlp")
        async with server.client() as api:
            job = await _job(api, sink.answer("/hole", (200, 0)), "* * * * * *")
            await wait_for(lambda: len(sink.at("/hole")) >= 2, timeout=10)  # runs go on meanwhile
            assert (await api.get(f"/v1/jobs/{job}/runs")).json()["items"][0]["trace_id"] is not None
        began = time.monotonic()
        assert await asyncio.to_thread(server.stop) == 0
        assert time.monotonic() - began < 15  # the 5 s bound and the rest of the stop, not 60 s
    assert "traces not exported" in server.log.read_text()

"""Operating a cluster: every role serves its metrics and says where; a
permanent error at start stops a process at once, a backend that comes up late is waited for.
Real processes over PostgreSQL, etcd and Redis."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import asyncpg
import pytest
from cluster_harness import (
    Cluster,
    Etcd,
    Redis,
    Sink,
    cluster_fixture,  # noqa: F401 - the `cluster` fixture
    create_jobs,
    database_url_fixture,  # noqa: F401 - the `database_url` fixture
    free_port,
)

from suite_backends import DEFAULT_POSTGRES_URL, POSTGRES_URL, REDIS_URL, postgres_url_with, redis_url_with

pytestmark = pytest.mark.integration


def _count(text: str, histogram: str) -> float:
    found = re.search(rf"^{histogram}_count (\S+)$", text, re.MULTILINE)
    assert found, f"no {histogram} in:\n{text[:2000]}"
    return float(found.group(1))


async def test_every_role_serves_its_metrics_and_says_where(cluster: tuple[Cluster, Sink]) -> None:
    nodes, sink = cluster
    api_node = nodes.start("api", "api-1")
    nodes.start("scheduler", "sched-1")
    nodes.start("worker", "worker-1")
    fixed = free_port()
    nodes.start("worker", "worker-2", "--metrics-port", str(fixed))
    async with nodes.client(api_node) as api:
        await create_jobs(api, f"{sink.url}/hook", 6)  # two runs a second in all
        deadline = time.monotonic() + 30
        while len(sink.deliveries) < 20 and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        assert len(sink.deliveries) >= 20
        nodes_by_name = {node["node"]: node for node in (await api.get("/v1/cluster")).json()["nodes"]}
        urls = {name: node["metrics_url"] for name, node in nodes_by_name.items()}
        roles = {name: node["roles"] for name, node in nodes_by_name.items()}
        scraped = {name: (await api.get(url)).text for name, url in urls.items()}
        health = [(await api.get(url.replace("/metrics", "/healthz"))).json() for url in urls.values()]
    shown = subprocess.run(
        [sys.executable, "-m", "cronwheel", "cluster", "status", "--url", api_node.url,
             "--token", nodes.bootstrap()],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip

    assert roles == {
        "api-1": ["api"],
        "sched-1": ["scheduler"],
        "worker-1": ["worker"],
        "worker-2": ["worker"],
    }
    assert urls["api-1"] == f"{api_node.url}/metrics"  # the api role keeps its /metrics
    assert urls["worker-2"] == f"http://127.0.0.1:{fixed}/metrics"
    assert len(set(urls.values())) == 4
    fired = _count(scraped["sched-1"], "cronwheel_fire_lateness_seconds")
    started = sum(_count(scraped[w], "cronwheel_start_lateness_seconds") for w in ("worker-1", "worker-2"))
    assert fired >= 20  # measured where runs are fired ...
    assert started >= 20  # ... and where they start
    assert _count(scraped["api-1"], "cronwheel_fire_lateness_seconds") == 0  # not the api's to tell
    assert health == [{"status": "ok"}] * 4
    assert shown.returncode == 0, shown.stderr
    assert "METRICS" in shown.stdout
    assert all(url in shown.stdout for url in urls.values()), shown.stdout
    # read at scrape time from etcd and Redis: one scheduler owns every shard
    # and leads; every node reports the queue it serves
    assert _sample(scraped["sched-1"], "cronwheel_shards_owned") == 256
    assert [_sample(scraped[n], "cronwheel_leader") for n in sorted(scraped)] == [0, 1, 0, 0]
    for text in scraped.values():
        assert _sample(text, 'cronwheel_queue_lag_seconds{queue="default"}') >= 0
    finished = 'cronwheel_runs_finished_total{queue="default",state="SUCCESS",team="c"}'
    assert sum(_sample(scraped[w], finished, 0.0) for w in ("worker-1", "worker-2")) >= 15
    linted = subprocess.run(
        [os.environ.get("PROMTOOL", "promtool"), "check", "metrics"],
        input=scraped["worker-2"], capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert linted.returncode == 0, linted.stdout + linted.stderr


def _sample(text: str, series: str, missing: float | None = None) -> float:
    found = re.search(rf"^{re.escape(series)} (\S+)$", text, re.MULTILINE)
    if found is None and missing is not None:
        return missing
    assert found, f"no {series} in:\n{text[:2000]}"
    return float(found.group(1))


async def _stamp_future_schema(database_url: str) -> None:
    connection = await asyncpg.connect(database_url.replace("postgresql://", "postgres://"))
    try:
        await connection.execute("CREATE TABLE alembic_version (version_num varchar(32) PRIMARY KEY)")
        await connection.execute("INSERT INTO alembic_version VALUES ('9999_from_the_future')")
    finally:
        await connection.close()


POSTGRES = POSTGRES_URL or DEFAULT_POSTGRES_URL  # the suite's server (opted out: `database_url` skips)
CASES = {
    "no such database": ({"CRONWHEEL_DATABASE_URL": postgres_url_with(POSTGRES, database="cw_nothing_here")},
                         "does not exist"),
    "unknown database role": ({"CRONWHEEL_DATABASE_URL": postgres_url_with(POSTGRES, username="cw_nobody")},
                              "refused the connection"),
    "schema newer than the code": ({}, "not one this cronwheel knows"),
    "Redis refuses the credentials": ({"CRONWHEEL_QUEUE_URL": redis_url_with(userinfo="cw_nobody:secret")},
                                      "refused the connection"),
    "Redis has no such database": ({"CRONWHEEL_QUEUE_URL": redis_url_with(db=999)}, "DB index"),
    "not an etcd URL": ({"CRONWHEEL_COORDINATOR_URL": "http://127.0.0.1:2379"}, "must look like etcd://"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
async def test_a_permanent_error_at_start_exits_non_zero_at_once(
    case: str, database_url: str, tmp_path: Path
) -> None:
    overrides, message = CASES[case]
    if case == "schema newer than the code":
        await _stamp_future_schema(database_url)
    env = {
        **os.environ,
        "CRONWHEEL_DATABASE_URL": database_url,
        "CRONWHEEL_COORDINATOR_URL": "etcd://127.0.0.1:9",  # never reached: the error comes first
        "CRONWHEEL_QUEUE_URL": REDIS_URL,
        **overrides,
    }
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "cronwheel", "scheduler", "--node-id", "doomed"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True,
    )  # fmt: skip
    try:
        output, _ = process.communicate(timeout=30)
    finally:
        if process.poll() is None:  # still retrying: the failure this test is about
            process.kill()
            process.communicate()
    elapsed = time.monotonic() - started
    assert process.returncode == 2, output
    assert message in output
    assert "error: " in output
    assert "Traceback" not in output
    assert "retrying" not in output  # not one wait: waiting cannot help
    print(f"{case}: exit 2 after {elapsed:.1f} s")


async def test_a_backend_that_comes_up_late_is_waited_for(database_url: str, tmp_path: Path) -> None:
    """The scheduler starts before its Redis: it waits (logged, with backoff), then runs."""
    etcd = Etcd(tmp_path / "etcd-data")
    etcd.start()
    late = Redis(tmp_path)  # its port is chosen; the server starts later
    log = tmp_path / "sched.log"
    env = {
        **os.environ,
        "CRONWHEEL_DATABASE_URL": database_url,
        "CRONWHEEL_COORDINATOR_URL": etcd.url,
        "CRONWHEEL_QUEUE_URL": late.url,
        "CRONWHEEL_TTL": "2",
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "cronwheel", "scheduler", "--node-id", "patient"],
        stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while log.read_text().count("backend=queue") < 2 and time.monotonic() < deadline:
            assert process.poll() is None, log.read_text()
            await asyncio.sleep(0.1)
        assert "running (node" not in log.read_text()  # nothing without its queue
        late.start()
        deadline = time.monotonic() + 40
        while "running (node patient" not in log.read_text():
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            await asyncio.sleep(0.1)
        waits = re.findall(r"retry_in_s=(\S+)", log.read_text())
        assert len(waits) >= 2
        assert float(waits[1]) > float(waits[0])  # backing off
    finally:
        process.terminate()
        process.wait(20)
        late.stop()
        etcd.stop()

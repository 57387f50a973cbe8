"""What the dashboard reads from ``/v1``: the ``late`` filter and mark, ``include=recent`` (each
job's newest runs, for sparklines, in one read for the page), and the cluster's fire-lateness
percentiles."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import insert

from cronwheel.api.app import ApiServices, create_app
from cronwheel.cluster.mode import Mode
from cronwheel.cluster.status import ClusterStatus
from cronwheel.coordinator.local import LocalCoordinator
from cronwheel.model import SHARDS, Run, RunKind, RunState, new_id
from cronwheel.store import codec, schema

from .conftest import BASE_URL, SERVED, Env, bearer, job_body

SECOND = timedelta(seconds=1)


async def _insert_runs(env: Env, runs: list[Run]) -> None:
    async with env.store.engine.begin() as connection:
        await connection.execute(insert(schema.runs), [codec.run_to_row(run) for run in runs])


def _run(job_id: str, minutes_ago: float, late_s: float, took_s: float | None, env: Env) -> Run:
    slot = env.clock.now() - timedelta(minutes=minutes_ago)
    finished = None if took_s is None else slot + (late_s + took_s) * SECOND
    return Run(
        id=new_id(), job_id=job_id, kind=RunKind.SCHEDULED, slot=slot,
        state=RunState.RUNNING if finished is None else RunState.SUCCESS,
        created_at=slot, queued_at=slot + late_s * SECOND, started_at=slot + late_s * SECOND,
        finished_at=finished,
    )  # fmt: skip


async def test_late_jobs_are_marked_and_filtered(client: httpx.AsyncClient, env: Env) -> None:
    every_minute = (await client.post("/v1/jobs", json=job_body("a", schedule="* * * * *"))).json()
    hourly = (await client.post("/v1/jobs", json=job_body("b", schedule="0 * * * *"))).json()
    paused = (await client.post("/v1/jobs", json=job_body("c", schedule="* * * * *"))).json()
    await client.post(f"/v1/jobs/{paused['id']}/pause", json={})
    assert every_minute["late"] is False
    assert (await client.get("/v1/jobs", params={"late": "true"})).json()["items"] == []
    env.clock.advance(150)  # no scheduler fires here: the 12:01 slot is 90 s past at 12:02:30
    late = (await client.get("/v1/jobs", params={"late": "true"})).json()["items"]
    assert [job["id"] for job in late] == [every_minute["id"]]
    assert late[0]["late"] is True
    everyone = {job["id"]: job["late"] for job in (await client.get("/v1/jobs")).json()["items"]}
    assert everyone == {every_minute["id"]: True, hourly["id"]: False, paused["id"]: False}
    assert (await client.get(f"/v1/jobs/{every_minute['id']}")).json()["late"] is True
    failing = await client.get("/v1/jobs", params={"late": "true", "last_state": "FAILED"})
    assert failing.json()["items"] == []  # the filters combine


async def test_include_recent_answers_each_jobs_newest_runs(client: httpx.AsyncClient, env: Env) -> None:
    busy = (await client.post("/v1/jobs", json=job_body("busy"))).json()
    idle = (await client.post("/v1/jobs", json=job_body("idle"))).json()
    await _insert_runs(env, [_run(busy["id"], 30 - i, i / 10, 1.5, env) for i in range(25)])
    await _insert_runs(env, [_run(busy["id"], 0, 0.25, None, env)])
    plain = (await client.get("/v1/jobs")).json()["items"]
    assert [job["recent"] for job in plain] == [None, None]  # not asked for
    page = (await client.get("/v1/jobs", params={"include": "recent"})).json()["items"]
    recent = {job["id"]: job["recent"] for job in page}
    assert recent[idle["id"]] == []
    points = recent[busy["id"]]
    assert len(points) == 20
    assert [p["slot"] for p in points] == sorted(p["slot"] for p in points)  # oldest first
    assert points[-1] == {
        "slot": points[-1]["slot"],
        "state": "RUNNING",
        "lateness_ms": 250.0,
        "duration_ms": None,
    }
    assert points[-2]["lateness_ms"] == pytest.approx(2400.0)
    assert points[-2]["duration_ms"] == pytest.approx(1500.0)
    refused = await client.get("/v1/jobs", params={"include": "everything"})
    assert refused.status_code == 422


@pytest.fixture
async def cluster_client(env: Env) -> AsyncIterator[httpx.AsyncClient]:
    status = ClusterStatus(
        env.store,
        env.queue,
        LocalCoordinator("n1", ("api",), env.clock),
        ("default",),
        Mode("sqlite", "local", "memory"),
        env.clock,
    )
    app = create_app(
        ApiServices(env.store, env.service, env.clock, env.readiness, cluster=status, access=SERVED)
    )
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(
        transport=transport, base_url=BASE_URL, headers=bearer(env.admin_token)
    ) as http:
        yield http


async def test_the_cluster_answers_fire_lateness_percentiles(
    cluster_client: httpx.AsyncClient, env: Env
) -> None:
    job = (await cluster_client.post("/v1/jobs", json=job_body())).json()
    empty = (await cluster_client.get("/v1/cluster")).json()["fire_lateness"]
    assert empty == {
        "window_s": 300, "sample_limit": 10_000, "count": 0,
        "p50_ms": None, "p90_ms": None, "p99_ms": None, "max_ms": None,
    }  # fmt: skip
    runs = [_run(job["id"], 4 - i / 30, (i + 1) / 1000, 1.0, env) for i in range(100)]  # 1..100 ms late
    runs.append(_run(job["id"], 6, 9.0, 1.0, env))  # before the window
    await _insert_runs(env, runs)
    lateness = (await cluster_client.get("/v1/cluster")).json()["fire_lateness"]
    assert lateness["count"] == 100
    assert (lateness["p50_ms"], lateness["p90_ms"], lateness["p99_ms"], lateness["max_ms"]) == pytest.approx(
        (50.0, 90.0, 99.0, 100.0)
    )


async def test_the_cluster_answers_how_many_shards_there_are_beside_the_claimed_ones(
    cluster_client: httpx.AsyncClient, env: Env
) -> None:
    """``shard_count`` (every shard) beside the claimed shards: the rest are unowned (the
    dashboard's bar of shards per node draws them)."""
    assert await env.store.claim_shards({0: 1, 7: 2}, "n1", env.clock.now()) == {0, 7}
    answer = (await cluster_client.get("/v1/cluster")).json()
    assert answer["shard_count"] == SHARDS == 256
    claimed = [{"shard": 0, "node": "n1", "epoch": 1}, {"shard": 7, "node": "n1", "epoch": 2}]
    assert answer["shards"] == claimed

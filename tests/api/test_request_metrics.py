"""API requests are counted by method, route template (never the raw path) and status, and timed."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from cronwheel.telemetry import metrics

from .conftest import job_body

JOB = "/v1/jobs/{job_id}"


def requests(method: str, route: str, status: int) -> float:
    labels = {"method": method, "route": route, "status": str(status)}
    return metrics.REGISTRY.get_sample_value("cronwheel_api_requests_total", labels) or 0.0


def timed(method: str, route: str) -> float:
    labels = {"method": method, "route": route}
    return metrics.REGISTRY.get_sample_value("cronwheel_api_request_duration_seconds_count", labels) or 0.0


async def test_requests_are_counted_by_route_template_and_status(
    client: httpx.AsyncClient, anonymous: httpx.AsyncClient
) -> None:
    before = {
        "created": requests("POST", "/v1/jobs", 201),
        "read": requests("GET", JOB, 200),
        "missing": requests("GET", JOB, 404),
        "refused": requests("GET", JOB, 401),
        "unmatched": requests("GET", "unmatched", 404),
        "timed": timed("GET", JOB),
    }
    created = await client.post("/v1/jobs", json=job_body())
    assert created.status_code == 201
    job_id = created.json()["id"]
    assert (await client.get(f"/v1/jobs/{job_id}")).status_code == 200
    assert (await client.get("/v1/jobs/no-such-job")).status_code == 404
    assert (await anonymous.get(f"/v1/jobs/{job_id}")).status_code == 401
    assert (await client.get("/v1/nowhere/at/all")).status_code == 404
    assert requests("POST", "/v1/jobs", 201) == before["created"] + 1
    assert requests("GET", JOB, 200) == before["read"] + 1
    assert requests("GET", JOB, 404) == before["missing"] + 1
    assert requests("GET", JOB, 401) == before["refused"] + 1
    assert requests("GET", "unmatched", 404) == before["unmatched"] + 1
    assert timed("GET", JOB) == before["timed"] + 3


async def test_no_label_names_a_job(client: httpx.AsyncClient) -> None:
    created = await client.post("/v1/jobs", json=job_body("labelled"))
    job_id = created.json()["id"]
    await client.get(f"/v1/jobs/{job_id}")
    await client.get("/v1/metrics")
    text = (await client.get("/metrics")).text
    assert job_id not in text
    routes = {
        sample.labels["route"]
        for family in text_string_to_metric_families(text)
        if family.name == "cronwheel_api_requests"
        for sample in family.samples
    }
    assert {JOB, "/v1/metrics"} <= routes  # /metrics itself is counted when it has answered
    assert all(route == "unmatched" or route.startswith("/") for route in routes)

"""``GET /v1/jobs/{id}/runs`` works for deleted jobs, whatever the page holds: an empty
page of a deleted job (no runs, or a ``state`` filter that matches none) is a 200, and only an id
that never named a job is a 404."""

from __future__ import annotations

import httpx

from .conftest import job_body


async def _job(client: httpx.AsyncClient, name: str) -> str:
    response = await client.post("/v1/jobs", json=job_body(name=name))
    assert response.status_code == 201, response.text
    job_id: str = response.json()["id"]
    return job_id


async def test_a_deleted_job_without_runs_lists_an_empty_page(client: httpx.AsyncClient) -> None:
    job_id = await _job(client, "quiet")
    assert (await client.delete(f"/v1/jobs/{job_id}")).status_code == 204
    response = await client.get(f"/v1/jobs/{job_id}/runs")
    assert response.status_code == 200, response.text
    assert response.json() == {"items": [], "next_cursor": None}


async def test_a_filter_matching_none_of_a_deleted_jobs_runs_is_an_empty_page(
    client: httpx.AsyncClient,
) -> None:
    job_id = await _job(client, "busy")
    run = (await client.post(f"/v1/jobs/{job_id}/trigger")).json()
    assert (await client.delete(f"/v1/jobs/{job_id}")).status_code == 204

    listed = await client.get(f"/v1/jobs/{job_id}/runs")
    assert listed.status_code == 200
    assert [item["id"] for item in listed.json()["items"]] == [run["id"]]
    none = await client.get(f"/v1/jobs/{job_id}/runs", params={"state": "SUCCESS"})
    assert none.status_code == 200, none.text
    assert none.json()["items"] == []


async def test_an_id_that_never_named_a_job_is_404(client: httpx.AsyncClient) -> None:
    for params in ({}, {"state": "SUCCESS"}):
        response = await client.get("/v1/jobs/never-created/runs", params=params)
        assert response.status_code == 404
        assert response.headers["content-type"].startswith("application/problem+json")
    live = await _job(client, "live")
    empty = await client.get(f"/v1/jobs/{live}/runs", params={"state": "FAILED"})
    assert (empty.status_code, empty.json()["items"]) == (200, [])

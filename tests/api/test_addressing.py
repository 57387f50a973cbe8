"""Every job route answers at /v1/jobs/{id} and at /v1/teams/{team}/jobs/{name}."""

from __future__ import annotations

from typing import Any

import httpx

from .conftest import Env, job_body

PROBLEM = "application/problem+json"
BY_NAME = "/v1/teams/data/jobs/nightly"


async def create(client: httpx.AsyncClient, **changes: Any) -> dict[str, Any]:
    response = await client.post("/v1/jobs", json=job_body(**changes))
    assert response.status_code == 201, response.text
    data: dict[str, Any] = response.json()
    return data


async def test_get_by_team_and_name(client: httpx.AsyncClient) -> None:
    job = await create(client)
    await create(client, team="web")  # the same name in another team
    response = await client.get(BY_NAME)
    assert response.status_code == 200, response.text
    assert response.json() == job
    assert response.headers["etag"] == '"1"'


async def test_put_and_patch_by_team_and_name(client: httpx.AsyncClient, env: Env) -> None:
    job = await create(client)
    put = await client.put(BY_NAME, json=job_body(schedule="0 4 * * *"), headers={"If-Match": '"1"'})
    assert put.status_code == 200, put.text
    assert (put.json()["id"], put.json()["schedule"], put.json()["version"]) == (job["id"], "0 4 * * *", 2)
    stale = await client.patch(BY_NAME, json={"description": "x"}, headers={"If-Match": '"1"'})
    assert stale.status_code == 412
    patch = await client.patch(BY_NAME, json={"name": "renamed"})
    assert patch.status_code == 200
    assert (await env.store.get_job(job["id"])).name == "renamed"
    assert (await client.get(BY_NAME)).status_code == 404  # the name moved with the job
    assert (await client.get("/v1/teams/data/jobs/renamed")).json()["id"] == job["id"]


async def test_pause_resume_trigger_and_runs_by_team_and_name(client: httpx.AsyncClient, env: Env) -> None:
    job = await create(client)
    paused = await client.post(f"{BY_NAME}/pause", json={"note": "maintenance"})
    assert paused.status_code == 200
    assert paused.json()["pause_note"] == "maintenance"
    resumed = await client.post(f"{BY_NAME}/resume", json={"missed": "misfire"})
    assert resumed.status_code == 200
    assert resumed.json()["paused"] is False
    trigger = await client.post(f"{BY_NAME}/trigger", json={"payload": 7}, headers={"Idempotency-Key": "k"})
    assert trigger.status_code == 201, trigger.text
    run = trigger.json()
    assert run["job_id"] == job["id"]
    again = await client.post(f"{BY_NAME}/trigger", headers={"Idempotency-Key": "k"})
    assert (again.status_code, again.json()["id"]) == (200, run["id"])
    runs = await client.get(f"{BY_NAME}/runs", params={"state": "PENDING"})
    assert runs.status_code == 200
    assert [item["id"] for item in runs.json()["items"]] == [run["id"]]
    assert [trigger.job_id for trigger in env.queue.published] == [job["id"]]


async def test_delete_by_team_and_name(client: httpx.AsyncClient, env: Env) -> None:
    job = await create(client)
    stale = await client.delete(BY_NAME, headers={"If-Match": '"9"'})
    assert stale.status_code == 412
    assert (await client.delete(BY_NAME)).status_code == 204
    assert (await env.store.get_jobs([job["id"]])) == {}
    gone = await client.get(BY_NAME)
    assert gone.status_code == 404
    assert gone.json()["detail"] == "team 'data' has no job named 'nightly'"


async def test_unknown_team_or_name_is_404_and_changes_nothing(client: httpx.AsyncClient, env: Env) -> None:
    job = await create(client)
    for method, path in [
        ("GET", "/v1/teams/web/jobs/nightly"),
        ("PATCH", "/v1/teams/data/jobs/daily"),
        ("DELETE", "/v1/teams/data/jobs/daily"),
        ("POST", "/v1/teams/data/jobs/daily/pause"),
        ("POST", "/v1/teams/data/jobs/daily/trigger"),
        ("GET", "/v1/teams/data/jobs/daily/runs"),
    ]:
        response = await client.request(method, path, json={} if method in ("PATCH", "POST") else None)
        assert response.status_code == 404, (method, path)
        assert response.headers["content-type"] == PROBLEM
    assert (await env.store.get_job(job["id"])).version == 1
    assert env.queue.published == []


async def test_names_that_look_like_routes(client: httpx.AsyncClient) -> None:
    """A job named "runs" or "pause" is no ambiguity in this form."""
    runs = await create(client, name="runs")
    pause = await create(client, name="pause")
    assert (await client.get("/v1/teams/data/jobs/runs")).json()["id"] == runs["id"]
    assert (await client.get("/v1/teams/data/jobs/runs/runs")).json()["items"] == []
    assert (await client.post("/v1/teams/data/jobs/pause/pause")).json()["id"] == pause["id"]


async def test_team_slash_name_under_jobs_points_to_the_right_form(client: httpx.AsyncClient) -> None:
    await create(client)
    for path in ("/v1/jobs/data/nightly", "/v1/jobs/data%2Fnightly"):
        response = await client.get(path)
        assert response.status_code == 404
        assert "/v1/teams/{team}/jobs/{name}" in response.json()["detail"]


async def test_openapi_documents_both_forms(client: httpx.AsyncClient) -> None:
    paths = (await client.get("/openapi.json")).json()["paths"]
    for suffix, methods in [
        ("", {"get", "put", "patch", "delete"}),
        ("/pause", {"post"}),
        ("/resume", {"post"}),
        ("/trigger", {"post"}),
        ("/runs", {"get"}),
    ]:
        assert set(paths["/v1/jobs/{job_id}" + suffix]) == methods
        by_name = paths["/v1/teams/{team}/jobs/{name}" + suffix]
        assert set(by_name) == methods
        for operation in by_name.values():
            names = {p["name"] for p in operation["parameters"] if p["in"] == "path"}
            assert names == {"team", "name"}

"""``POST /v1/jobs:validate`` and ``POST /v1/jobs/{id}/validate``: the checks of create and replace,
writing nothing.

Each refusal is compared with what create (or PUT) answers for the same body, so the two cannot
drift apart; each acceptance is checked to have written nothing (no job, no version bump, no audit
entry, no change announced).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import httpx
import pytest

from cronwheel.audit import AuditQuery
from cronwheel.auth.identity import Scope
from cronwheel.limits import Limits
from cronwheel.store import JobQuery

from .conftest import Env, bearer, issue_token, job_body


async def nothing_written(env: Env) -> None:
    assert (await env.store.list_jobs(JobQuery())).items == []
    assert (await env.store.list_audit(AuditQuery())).items == []
    assert env.changes.empty()


async def test_a_valid_definition_answers_the_job_as_it_would_be_stored(
    client: httpx.AsyncClient, env: Env
) -> None:
    response = await client.post("/v1/jobs:validate", json=job_body(schedule="*/15 9-17 * * MON-FRI"))
    assert response.status_code == 200, response.text
    checked = response.json()
    assert checked["id"] is None
    assert checked["schedule_description"] == "every 15 minutes from 09:00 to 17:45 on Monday through Friday"
    assert (checked["timeout_s"], checked["overlap"], checked["queue"]) == (60.0, "allow", "default")
    assert checked["misfire"] == {"policy": "skip", "grace_s": 60.0, "max_catch_up": 10}
    # Monday 2026-03-02 12:00 UTC is 13:00 in Berlin: the next slot is 13:15 (12:15 UTC)
    assert checked["next_run_at"] == "2026-03-02T12:15:00Z"
    assert [fire["utc"] for fire in checked["fires"]] == [
        "2026-03-02T12:15:00Z", "2026-03-02T12:30:00Z", "2026-03-02T12:45:00Z",
        "2026-03-02T13:00:00Z", "2026-03-02T13:15:00Z",
    ]  # fmt: skip
    assert checked["warnings"] == []
    await nothing_written(env)


async def test_fires_stay_inside_the_window(client: httpx.AsyncClient) -> None:
    body = job_body(schedule="0 * * * *", start_at="2026-03-05T00:00:00Z", end_at="2026-03-05T02:00:00Z")
    checked = (await client.post("/v1/jobs:validate", json=body)).json()
    assert checked["next_run_at"] == "2026-03-05T00:00:00Z"
    assert [fire["utc"] for fire in checked["fires"]] == [
        "2026-03-05T00:00:00Z", "2026-03-05T01:00:00Z", "2026-03-05T02:00:00Z",
    ]  # fmt: skip


BAD = {
    "cron": {"schedule": "61 * * * *"},
    "zone": {"timezone": "Europe/Atlantis"},
    "never fires": {"schedule": "0 0 30 2 *"},
    "end passed": {"end_at": "2026-03-01T00:00:00Z"},
    "window between fires": {"start_at": "2026-03-05T03:10:00Z", "end_at": "2026-03-05T03:20:00Z"},
    "loopback target": {"target": {"type": "http", "url": "http://127.0.0.1/hook"}},
    "command not allowed": {"target": {"type": "command", "argv": ["/bin/true"]}},
    "unknown secret": {
        "target": {"type": "http", "url": "https://hooks.example.com/x", "headers": {"A": {"secret": "nope"}}}
    },
    "fields": {"timeout_s": -1, "overlap": "sometimes", "labels": {"": "x"}},
    "unknown field": {"retries": 3},
}


def _problem(response: httpx.Response) -> tuple[int, Any]:
    body = response.json()
    return response.status_code, (body.get("type"), body.get("detail"), body.get("errors"))


@pytest.mark.parametrize("change", BAD.values(), ids=BAD.keys())
async def test_a_refusal_is_the_one_create_gives(
    client: httpx.AsyncClient, env: Env, change: dict[str, Any]
) -> None:
    body = job_body(**change)
    validated = await client.post("/v1/jobs:validate", json=body)
    assert validated.status_code == 422, validated.text
    assert validated.headers["content-type"] == "application/problem+json"
    assert validated.json()["errors"], "each refusal names its field"
    await nothing_written(env)
    created = await client.post("/v1/jobs", json=body)
    assert _problem(validated) == _problem(created)


async def test_the_operators_interval_is_judged_as_on_create(client: httpx.AsyncClient, env: Env) -> None:
    env.service.limits = dataclasses.replace(Limits(), min_interval_s=300)
    body = job_body(schedule="* * * * *")
    validated = await client.post("/v1/jobs:validate", json=body)
    assert validated.status_code == 422
    assert _problem(validated) == _problem(await client.post("/v1/jobs", json=body))


async def test_a_caller_of_another_team_may_not_validate_into_this_one(env: Env) -> None:
    token = await issue_token(env.store, Scope.WRITE, team="web")
    async with env.client(token) as http:
        response = await http.post("/v1/jobs:validate", json=job_body())
    assert response.status_code == 403
    assert (await env.store.list_jobs(JobQuery())).items == []
    entries = (await env.store.list_audit(AuditQuery())).items
    assert [entry.outcome for entry in entries] == ["forbidden"]  # a denial is audited, as everywhere


async def test_an_edit_is_validated_against_the_stored_job_and_nothing_changes(
    client: httpx.AsyncClient, env: Env
) -> None:
    job = (await client.post("/v1/jobs", json=job_body(schedule="H * * * *"))).json()
    await env.store.prune_audit(env.clock.now().replace(year=2100))  # the create's entry
    while not env.changes.empty():
        env.changes.get_nowait()
    body = job_body(schedule="H H * * *", description="edited")
    for path in (f"/v1/jobs/{job['id']}/validate", "/v1/teams/data/jobs/nightly/validate"):
        response = await client.post(path, json=body)
        assert response.status_code == 200, response.text
        checked = response.json()
        assert checked["id"] == job["id"]
        assert checked["description"] == "edited"
        assert checked["schedule_description"].endswith(" (H)")  # hashed with the job's own id
        assert checked["fires"][0]["utc"] == checked["next_run_at"]
    stored = await env.store.get_job(job["id"])
    assert (stored.version, stored.schedule, stored.description) == (1, "H * * * *", "")
    assert (await env.store.list_audit(AuditQuery())).items == []
    assert env.changes.empty()
    refused = await client.post(f"/v1/jobs/{job['id']}/validate", json=job_body(schedule="0 0 31 2 *"))
    put = await client.put(f"/v1/jobs/{job['id']}", json=job_body(schedule="0 0 31 2 *"))
    assert refused.status_code == 422
    assert _problem(refused) == _problem(put)


async def test_an_unchanged_timing_is_not_judged_again(client: httpx.AsyncClient, env: Env) -> None:
    """As PUT: a minimum interval raised later does not refuse an edit that keeps the timing."""
    job = (await client.post("/v1/jobs", json=job_body(schedule="* * * * *"))).json()
    env.service.limits = dataclasses.replace(Limits(), min_interval_s=300)
    same_timing = job_body(schedule="* * * * *", description="v2")
    response = await client.post(f"/v1/jobs/{job['id']}/validate", json=same_timing)
    assert response.status_code == 200, response.text
    retimed = await client.post(f"/v1/jobs/{job['id']}/validate", json=job_body(schedule="*/2 * * * *"))
    assert retimed.status_code == 422


async def test_validate_needs_the_write_scope(env: Env) -> None:
    token = await issue_token(env.store, Scope.READ, team="data")
    async with env.client(token) as http:
        response = await http.post("/v1/jobs:validate", json=job_body(), headers=bearer(token))
    assert response.status_code == 403

"""Jobs on ``@every`` and ``@at`` schedules over the API: created with their first slot, previewed
and validated with their words, and a one-time job whose instant has passed accepted only when its
misfire policy would still run it. The clock is 2026-03-02T12:00Z."""

from __future__ import annotations

import httpx

from cronwheel.store import JobQuery

from .conftest import Env, job_body


async def test_an_interval_job_starts_on_its_next_multiple_of_the_interval(client: httpx.AsyncClient) -> None:
    created = await client.post("/v1/jobs", json=job_body(schedule="@every 7h"))
    assert created.status_code == 201, created.text
    job = created.json()
    assert job["next_run_at"] == "2026-03-02T16:00:00Z"  # the next whole multiple of 7 h since the epoch
    assert job["schedule_description"] == "every 7 hours of elapsed time"
    anchored = await client.post(
        "/v1/jobs", json=job_body(name="anchored", schedule="@every 90m from 2026-03-05T08:00:00+01:00")
    )
    assert anchored.json()["next_run_at"] == "2026-03-05T07:00:00Z"


async def test_validate_and_preview_show_elapsed_fires_across_dst(client: httpx.AsyncClient) -> None:
    body = job_body(schedule="@every 24h from 2026-03-28T03:00:00+01:00")
    validated = await client.post("/v1/jobs:validate", json=body)
    assert validated.status_code == 200, validated.text
    fires = [fire["at"] for fire in validated.json()["fires"][:3]]
    assert fires == ["2026-03-28T03:00:00+01:00", "2026-03-29T04:00:00+02:00", "2026-03-30T04:00:00+02:00"]
    assert any("DST change on 2026-03-29" in warning for warning in validated.json()["warnings"])
    preview = await client.post(
        "/v1/schedules/preview",
        json={
            "expression": "@every 30m",
            "timezone": "America/New_York",
            "after": "2026-11-01T05:10:00Z",
            "count": 3,
        },
    )
    assert preview.status_code == 200, preview.text
    kinds = [(fire["at"], fire["kind"]) for fire in preview.json()["fires"]]
    assert kinds == [
        ("2026-11-01T01:30:00-04:00", "repeated-first"),
        ("2026-11-01T01:00:00-05:00", "repeated-second"),
        ("2026-11-01T01:30:00-05:00", "repeated-second"),
    ]


async def test_a_one_time_job_fires_at_its_instant(client: httpx.AsyncClient) -> None:
    created = await client.post("/v1/jobs", json=job_body(schedule="@at 2026-03-03T09:30:00+01:00"))
    assert created.status_code == 201, created.text
    assert created.json()["next_run_at"] == "2026-03-03T08:30:00Z"
    assert created.json()["schedule_description"] == "once, at 2026-03-03 09:30:00 CET"


async def test_a_past_one_time_job_is_refused_unless_its_misfire_policy_runs_it(
    client: httpx.AsyncClient, env: Env
) -> None:
    past = "@at 2026-03-02T11:00:00Z"  # an hour ago
    refused = await client.post("/v1/jobs", json=job_body(schedule=past))
    assert refused.status_code == 422, refused.text
    problem = refused.json()
    assert problem["type"] == "urn:cronwheel:problem:no-slot"
    assert "has passed (now 2026-03-02T12:00:00Z) and misfire skip with grace_s" in problem["detail"]
    assert [error["field"] for error in problem["errors"]] == ["schedule"]
    assert (await env.store.list_jobs(JobQuery())).items == []
    late = await client.post("/v1/jobs", json=job_body(schedule=past, misfire={"policy": "run_once"}))
    assert late.status_code == 201, late.text
    assert late.json()["next_run_at"] == "2026-03-02T11:00:00Z"  # due: the next pass fires it, late
    within_grace = job_body(name="graced", schedule=past, misfire={"policy": "skip", "grace_s": 7200})
    assert (await client.post("/v1/jobs", json=within_grace)).status_code == 201


async def test_dst_options_with_an_elapsed_schedule_are_refused(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/jobs", json=job_body(schedule="@every 1h", dst_gap="skip"))
    assert response.status_code == 422
    assert "apply to cron schedules, not to @every or @at" in response.text


async def test_delete_after_success_is_kept_on_a_one_time_job(client: httpx.AsyncClient) -> None:
    body = job_body(schedule="@at 2026-03-03T09:30:00+01:00", delete_after_success=True)
    created = await client.post("/v1/jobs", json=body)
    assert created.status_code == 201, created.text
    job_id = created.json()["id"]
    assert (await client.get(f"/v1/jobs/{job_id}")).json()["delete_after_success"] is True
    cleared = await client.patch(f"/v1/jobs/{job_id}", json={"delete_after_success": False})
    assert cleared.status_code == 200, cleared.text
    assert cleared.json()["delete_after_success"] is False
    plain = await client.post("/v1/jobs", json=job_body(name="plain"))
    assert plain.json()["delete_after_success"] is False


async def test_delete_after_success_on_a_job_that_fires_again_is_refused_whole(
    client: httpx.AsyncClient, env: Env
) -> None:
    for schedule in ("*/5 * * * *", "@every 1h"):
        refused = await client.post("/v1/jobs", json=job_body(schedule=schedule, delete_after_success=True))
        assert refused.status_code == 422, refused.text
        problem = refused.json()
        assert problem["type"] == "urn:cronwheel:problem:not-one-time"
        assert "for one-time jobs only" in problem["detail"]
        entries = [(entry["field"], entry["code"]) for entry in problem["errors"]]
        assert entries == [("delete_after_success", "not_one_time")]
    assert (await env.store.list_jobs(JobQuery())).items == []

    once = await client.post(
        "/v1/jobs", json=job_body(schedule="@at 2026-03-03T09:30:00Z", delete_after_success=True)
    )
    job_id = once.json()["id"]
    recurring = await client.patch(f"/v1/jobs/{job_id}", json={"schedule": "0 3 * * *"})  # the flag stays
    assert recurring.status_code == 422, recurring.text
    assert recurring.json()["type"] == "urn:cronwheel:problem:not-one-time"
    stored = await env.store.get_job(job_id)
    assert (stored.schedule, stored.version) == ("@at 2026-03-03T09:30:00Z", 1)  # nothing written

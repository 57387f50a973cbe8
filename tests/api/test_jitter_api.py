"""A job's jitter window over the REST API: created, read and patched with it, each slot's fire
time shown (the job's ``next_fire_at``, a validation's and a preview's ``fires_at``), a window not
shorter than the schedule's shortest gap refused whole (``jitter-too-wide``), and a run's
``due_at`` answered."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from cronwheel.model import Firing, Run, RunKind, RunState
from cronwheel.schedule.jitter import fire_at
from cronwheel.store import JobQuery

from .conftest import Env, job_body

PROBLEM = "application/problem+json"
TYPE = "urn:cronwheel:problem:"


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def _text(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


async def test_a_job_is_created_and_read_with_its_window(client: httpx.AsyncClient, env: Env) -> None:
    response = await client.post("/v1/jobs", json=job_body(schedule="*/5 * * * *", jitter_s=90))
    assert response.status_code == 201, response.text
    job = response.json()
    assert job["jitter_s"] == 90.0
    slot = _utc(job["next_run_at"])
    assert _utc(job["next_fire_at"]) == fire_at(job["id"], slot, 90.0)
    assert (await env.store.get_job(job["id"])).jitter_s == 90.0
    read = (await client.get(f"/v1/jobs/{job['id']}")).json()
    assert (read["jitter_s"], read["next_fire_at"]) == (90.0, job["next_fire_at"])


async def test_without_a_window_a_slot_fires_at_itself(client: httpx.AsyncClient) -> None:
    job = (await client.post("/v1/jobs", json=job_body())).json()
    assert job["jitter_s"] == 0.0
    assert job["next_fire_at"] == job["next_run_at"]


async def test_a_window_as_long_as_the_shortest_gap_is_refused_whole(
    client: httpx.AsyncClient, env: Env
) -> None:
    response = await client.post(
        "/v1/jobs", json=job_body(schedule="*/5 * * * *", timezone="UTC", jitter_s=300)
    )
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == PROBLEM
    found: dict[str, Any] = response.json()
    assert found["type"] == TYPE + "jitter-too-wide"
    assert (found["jitter_s"], found["shortest_gap_s"]) == (300, 300)
    assert "shortest gap between two slots of '*/5 * * * *' (UTC): 300 s" in found["detail"]
    [entry] = found["errors"]
    assert (entry["field"], entry["code"], entry["shortest_gap_s"]) == ("jitter_s", "jitter_too_wide", 300)
    assert (await env.store.list_jobs(JobQuery())).items == []  # nothing written
    assert env.changes.empty()
    below = await client.post("/v1/jobs", json=job_body(schedule="*/5 * * * *", jitter_s=299.999))
    assert below.status_code == 201, below.text


async def test_a_dst_change_narrows_the_gap_a_window_must_fit(client: httpx.AsyncClient) -> None:
    """01:30 and 03:30 are an hour apart on the night New York skips 02:00-03:00."""
    body = job_body(schedule="30 1,3 * * *", timezone="America/New_York", jitter_s=3600)
    found = (await client.post("/v1/jobs", json=body)).json()
    assert (found["type"], found["shortest_gap_s"]) == (TYPE + "jitter-too-wide", 3600)
    assert "2026-03-08T01:30:00-05:00, then 2026-03-08T03:30:00-04:00" in found["detail"]
    utc = await client.post("/v1/jobs", json=body | {"timezone": "UTC"})
    assert utc.status_code == 201, utc.text


async def test_out_of_range_windows_are_schema_errors(client: httpx.AsyncClient, env: Env) -> None:
    for bad in (-1, 86_401, "30s"):
        response = await client.post(
            "/v1/jobs", json=job_body(schedule="@at 2027-01-01T00:00:00Z", jitter_s=bad)
        )
        assert response.status_code == 422, (bad, response.text)
        assert [error["field"] for error in response.json()["errors"]] == ["jitter_s"]
    assert (await env.store.list_jobs(JobQuery())).items == []
    one_time = await client.post(
        "/v1/jobs", json=job_body(schedule="@at 2027-01-01T00:00:00Z", jitter_s=86_400)
    )
    assert one_time.status_code == 201, one_time.text  # no gap: any window up to a day


async def test_a_patch_that_widens_the_window_past_the_gap_is_refused(
    client: httpx.AsyncClient, env: Env
) -> None:
    job = (await client.post("/v1/jobs", json=job_body(schedule="0 * * * *", jitter_s=60))).json()
    widened = await client.patch(f"/v1/jobs/{job['id']}", json={"jitter_s": 3600})
    assert widened.json()["type"] == TYPE + "jitter-too-wide"
    narrowed = await client.patch(f"/v1/jobs/{job['id']}", json={"jitter_s": 1800})
    assert narrowed.status_code == 200, narrowed.text
    assert narrowed.json()["jitter_s"] == 1800.0
    stored = await env.store.get_job(job["id"])
    assert (stored.jitter_s, stored.version, stored.next_run_at) == (1800.0, 2, _utc(job["next_run_at"]))


async def test_validation_and_preview_show_each_fire_time(client: httpx.AsyncClient) -> None:
    job = (await client.post("/v1/jobs", json=job_body(schedule="0 * * * *", jitter_s=600))).json()
    checked = (
        await client.post(f"/v1/jobs/{job['id']}/validate", json=job_body(schedule="0 * * * *", jitter_s=600))
    ).json()
    assert checked["fires"]
    for fire in checked["fires"]:
        assert _utc(fire["fires_at"]) == fire_at(job["id"], _utc(fire["utc"]), 600.0)
    new = (
        await client.post("/v1/jobs:validate", json=job_body("other", schedule="0 * * * *", jitter_s=600))
    ).json()
    assert all(fire["fires_at"] is None for fire in new["fires"])  # no id yet: offsets unknown
    assert any("depends on the job id" in warning for warning in new["warnings"])
    body = {"expression": "0 * * * *", "count": 3, "jitter_s": 600, "seed": job["id"]}
    preview = (await client.post("/v1/schedules/preview", json=body)).json()
    assert [_utc(fire["fires_at"]) for fire in preview["fires"]] == [
        fire_at(job["id"], _utc(fire["utc"]), 600.0) for fire in preview["fires"]
    ]
    unseeded = (await client.post("/v1/schedules/preview", json={**body, "seed": None})).json()
    assert all(fire["fires_at"] is None for fire in unseeded["fires"])
    assert any("depends on the job id" in warning for warning in unseeded["warnings"])


async def test_a_run_answers_its_fire_time_and_lateness_from_it(client: httpx.AsyncClient, env: Env) -> None:
    job = (await client.post("/v1/jobs", json=job_body(schedule="0 * * * *", jitter_s=600))).json()
    slot = _utc(job["next_run_at"])
    due = fire_at(job["id"], slot, 600.0)
    stored = await env.store.get_job(job["id"])
    run = Run(
        id="r-1", job_id=job["id"], kind=RunKind.SCHEDULED, slot=slot, state=RunState.PENDING,
        due_at=due, created_at=slot, job_version=stored.version,
    )  # fmt: skip
    firing = Firing(job["id"], stored.version, slot, slot + timedelta(hours=1), (run,))
    assert [each.id for each in (await env.store.fire([firing], slot)).accepted] == ["r-1"]
    await env.store.mark_queued([run.id], due + timedelta(milliseconds=250))
    answered = (await client.get("/v1/runs/r-1")).json()
    assert (answered["slot"], answered["due_at"]) == (_text(slot), _text(due))
    assert answered["queued_lateness_s"] == 0.25
    listed = (await client.get(f"/v1/jobs/{job['id']}/runs")).json()
    assert [item["due_at"] for item in listed["items"]] == [_text(due)]

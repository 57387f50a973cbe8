"""``/v1/jobs/{job}/backfills``: a backfill accepted (202) and its progress, a dry run that writes
nothing, and every refusal as a problem naming its field (nothing written)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from cronwheel.scheduler.backfill import BACKFILL_CONFIRM_SLOTS
from cronwheel.scheduler.backfiller import Backfiller

from .conftest import Env, job_body

HOURLY = {"schedule": "0 * * * *", "timezone": "UTC"}  # created at 12:00 on 2026-03-02


async def create(client: httpx.AsyncClient) -> dict[str, Any]:
    response = await client.post("/v1/jobs", json=job_body(**HOURLY))
    assert response.status_code == 201, response.text
    data: dict[str, Any] = response.json()
    return data


async def test_a_backfill_is_accepted_and_shows_its_progress(client: httpx.AsyncClient, env: Env) -> None:
    job = await create(client)
    body = {"from": "2026-03-02T08:00:00+01:00", "to": "2026-03-02T10:30:00Z"}  # 07:00Z to 10:30Z
    response = await client.post(f"/v1/jobs/{job['id']}/backfills", json=body)
    assert response.status_code == 202, response.text
    accepted = response.json()
    assert response.headers["location"] == f"/v1/jobs/{job['id']}/backfills/{accepted['id']}"
    shown = ("from", "to", "state", "total", "created", "existing", "remaining")
    assert {key: accepted[key] for key in shown} == {
        "from": "2026-03-02T07:00:00Z", "to": "2026-03-02T10:30:00Z", "state": "running",
        "total": 4, "created": 0, "existing": 0, "remaining": 4,
    }  # fmt: skip
    assert accepted["next_slot"] == "2026-03-02T07:00:00Z"
    await Backfiller(env.store, env.queue, env.clock, runs_per_s=100).advance(env.clock.now())
    [listed] = (await client.get(f"/v1/jobs/{job['id']}/backfills")).json()["items"]
    assert (listed["id"], listed["state"], listed["created"], listed["remaining"]) == (
        accepted["id"],
        "done",
        4,
        0,
    )
    runs = (await client.get(f"/v1/jobs/{job['id']}/runs")).json()["items"]
    assert [(run["slot"], run["kind"]) for run in runs] == [
        (f"2026-03-02T{hour:02d}:00:00Z", "backfill") for hour in (10, 9, 8, 7)
    ]
    by_name = await client.get(f"/v1/teams/data/jobs/{job['name']}/backfills")
    assert [item["id"] for item in by_name.json()["items"]] == [accepted["id"]]
    one = await client.get(response.headers["location"])
    assert one.json() == listed
    other = await client.post("/v1/jobs", json=job_body(name="other", **HOURLY))
    elsewhere = await client.get(f"/v1/jobs/{other.json()['id']}/backfills/{accepted['id']}")
    assert elsewhere.status_code == 404  # a backfill is read through its own job
    assert (await client.get(f"/v1/jobs/{job['id']}/backfills/nope")).status_code == 404


async def test_a_dry_run_lists_the_slots_and_writes_nothing(client: httpx.AsyncClient, env: Env) -> None:
    job = await create(client)
    await client.post(
        f"/v1/jobs/{job['id']}/backfills",
        json={"from": "2026-03-02T09:00:00Z", "to": "2026-03-02T09:00:00.5Z"},
    )
    await Backfiller(env.store, env.queue, env.clock, runs_per_s=100).advance(env.clock.now())
    body = {"from": "2026-03-02T08:00:00Z", "to": "2026-03-02T10:00:00Z", "dry_run": True}
    response = await client.post(f"/v1/jobs/{job['id']}/backfills", json=body)
    assert response.status_code == 200, response.text
    assert response.json() == {
        "job_id": job["id"], "from": "2026-03-02T08:00:00Z", "to": "2026-03-02T10:00:00Z", "total": 3,
        "create": ["2026-03-02T08:00:00Z", "2026-03-02T10:00:00Z"], "existing": ["2026-03-02T09:00:00Z"],
        "confirm_required": False,
    }  # fmt: skip
    assert len((await client.get(f"/v1/jobs/{job['id']}/backfills")).json()["items"]) == 1


@pytest.mark.parametrize(
    ("body", "status", "field", "code"),
    [
        ({"from": "2026-03-02T10:00:00Z", "to": "2026-03-02T08:00:00Z"}, 422, "to", "range_order"),
        ({"from": "2026-03-02T08:00:00Z", "to": "2026-03-02T13:00:00Z"}, 422, "to", "in_future"),
        ({"from": "2026-03-02T08:10:00Z", "to": "2026-03-02T08:20:00Z"}, 422, "from", "no_slot"),
        ({"from": "2026-03-02T08:00:00", "to": "2026-03-02T10:00:00Z"}, 422, "from", "timezone_aware"),
        ({"from": "yesterday", "to": "2026-03-02T10:00:00Z"}, 422, "from", "value_error"),
        ({"to": "2026-03-02T10:00:00Z"}, 422, "from", "missing"),
        (
            {"from": "2026-03-02T08:00:00Z", "to": "2026-03-02T10:00:00Z", "rate": 5},
            422,
            "rate",
            "extra_forbidden",
        ),
    ],
)
async def test_bad_input_is_a_problem_naming_the_field_and_writes_nothing(
    client: httpx.AsyncClient, body: dict[str, Any], status: int, field: str, code: str
) -> None:
    job = await create(client)
    response = await client.post(f"/v1/jobs/{job['id']}/backfills", json=body)
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    [error] = response.json()["errors"]
    assert (error["field"], error["code"]) == (field, code)
    assert (await client.get(f"/v1/jobs/{job['id']}/backfills")).json()["items"] == []


async def test_more_slots_than_the_limit_need_confirm(client: httpx.AsyncClient, env: Env) -> None:
    response = await client.post("/v1/jobs", json=job_body(schedule="* * * * *", timezone="UTC"))
    job = response.json()
    env.clock.advance(24 * 3600)
    body = {"from": "2026-03-02T12:00:00Z", "to": "2026-03-03T12:00:00Z"}  # 1441 slots
    refused = await client.post(f"/v1/jobs/{job['id']}/backfills", json=body)
    assert refused.status_code == 422
    problem = refused.json()
    assert problem["type"].endswith(":backfill-confirm-required")
    assert (problem["slots"], problem["limit"]) == (1441, BACKFILL_CONFIRM_SLOTS)
    assert problem["errors"][0]["field"] == "confirm"
    plan = await client.post(f"/v1/jobs/{job['id']}/backfills", json=body | {"dry_run": True})
    assert (plan.json()["total"], plan.json()["confirm_required"]) == (1441, True)
    assert (await client.get(f"/v1/jobs/{job['id']}/backfills")).json()["items"] == []
    accepted = await client.post(f"/v1/jobs/{job['id']}/backfills", json=body | {"confirm": True})
    assert (accepted.status_code, accepted.json()["total"]) == (202, 1441)


async def test_an_unknown_job_is_404(client: httpx.AsyncClient) -> None:
    body = {"from": "2026-03-02T08:00:00Z", "to": "2026-03-02T10:00:00Z"}
    assert (await client.post("/v1/jobs/nope/backfills", json=body)).status_code == 404
    assert (await client.get("/v1/jobs/nope/backfills")).status_code == 404


async def test_a_running_backfill_is_cancelled_and_keeps_the_runs_it_created(
    client: httpx.AsyncClient, env: Env
) -> None:
    job = await create(client)
    body = {"from": "2026-03-02T07:00:00Z", "to": "2026-03-02T10:30:00Z"}  # 4 slots
    accepted = (await client.post(f"/v1/jobs/{job['id']}/backfills", json=body)).json()
    backfiller = Backfiller(env.store, env.queue, env.clock, runs_per_s=1)  # one run a pass
    await backfiller.advance(env.clock.now())
    cancel = f"/v1/jobs/{job['id']}/backfills/{accepted['id']}/cancel"

    response = await client.post(cancel)

    assert response.status_code == 200, response.text
    cancelled = response.json()
    shown = ("state", "created", "existing", "remaining", "next_slot")
    assert {key: cancelled[key] for key in shown} == {
        "state": "cancelled", "created": 1, "existing": 0, "remaining": 3, "next_slot": None,
    }  # fmt: skip
    assert (await client.get(f"/v1/jobs/{job['id']}/backfills/{accepted['id']}")).json() == cancelled
    assert await backfiller.advance(env.clock.now()) == 0  # its next step creates nothing
    runs = (await client.get(f"/v1/jobs/{job['id']}/runs")).json()["items"]
    assert [(run["slot"], run["kind"]) for run in runs] == [("2026-03-02T07:00:00Z", "backfill")]
    audited = (await client.get("/v1/audit", params={"action": "job.backfill_cancel"})).json()["items"]
    assert [entry["target_id"] for entry in audited] == [job["id"]]

    again = await client.post(cancel)
    assert again.status_code == 409, again.text
    problem = again.json()
    assert (problem["type"], problem["state"]) == ("urn:cronwheel:problem:not-running", "cancelled")
    assert problem["detail"] == f"backfill {accepted['id']} is cancelled, not running"


async def test_cancelling_a_done_another_jobs_or_an_unknown_backfill_is_refused(
    client: httpx.AsyncClient, env: Env
) -> None:
    job = await create(client)
    body = {"from": "2026-03-02T07:00:00Z", "to": "2026-03-02T08:00:00Z"}
    done = (await client.post(f"/v1/jobs/{job['id']}/backfills", json=body)).json()
    await Backfiller(env.store, env.queue, env.clock, runs_per_s=100).advance(env.clock.now())
    refused = await client.post(f"/v1/jobs/{job['id']}/backfills/{done['id']}/cancel")
    assert refused.status_code == 409, refused.text
    assert (refused.json()["type"], refused.json()["state"]) == ("urn:cronwheel:problem:not-running", "done")
    assert (await env.store.get_backfill(done["id"])).state.value == "done"  # nothing written

    other = (await client.post("/v1/jobs", json=job_body(name="other", **HOURLY))).json()
    assert (await client.post(f"/v1/jobs/{other['id']}/backfills/{done['id']}/cancel")).status_code == 404
    assert (await client.post(f"/v1/jobs/{job['id']}/backfills/nope/cancel")).status_code == 404
    assert (await client.post(f"/v1/jobs/nope/backfills/{done['id']}/cancel")).status_code == 404
    by_name = await client.post(f"/v1/teams/data/jobs/{job['name']}/backfills/{done['id']}/cancel")
    assert by_name.status_code == 409

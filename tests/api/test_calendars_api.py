"""Team calendars over the API (``/v1/teams/{team}/calendars``), and jobs that list them.

Each refusal is a problem naming the field, with nothing written; another team's calendars
answer 404 and are not listed; a job's calendar fields round-trip; an edit of a calendar reaches
the jobs that list it (their version moves, the schedulers hear of them); a listed calendar is
not deleted (409 naming the jobs)."""

from __future__ import annotations

from typing import Any, get_args

import httpx
import pytest

from cronwheel.api.routes.calendars import Weekday
from cronwheel.auth.identity import Scope
from cronwheel.schedule.calendar import WEEKDAYS

from .conftest import Env, issue_token, job_body

PROBLEM = "application/problem+json"
WEEKENDS: dict[str, Any] = {"name": "weekends", "weekdays": ["sat", "sun"], "description": "closed"}


async def create(client: httpx.AsyncClient, team: str = "data", **body: Any) -> httpx.Response:
    return await client.post(f"/v1/teams/{team}/calendars", json={**WEEKENDS, **body})


async def test_create_get_list_replace_delete(client: httpx.AsyncClient) -> None:
    created = await create(
        client,
        dates=["2027-01-01"],
        ranges=[{"from": "2027-12-24", "to": "2027-12-26"}],
        holidays={"country": "DE", "subdivision": "BY"},
    )
    assert created.status_code == 201, created.text
    assert created.headers["location"] == "/v1/teams/data/calendars/weekends"
    body = created.json()
    assert body == {
        "team": "data",
        "name": "weekends",
        "description": "closed",
        "dates": ["2027-01-01"],
        "ranges": [{"from": "2027-12-24", "to": "2027-12-26"}],
        "weekdays": ["sat", "sun"],
        "holidays": {"country": "DE", "subdivision": "BY"},
        "version": 1,
        "created_at": "2026-03-02T12:00:00Z",
        "updated_at": "2026-03-02T12:00:00Z",
    }
    assert (await client.get("/v1/teams/data/calendars/weekends")).json() == body
    assert [c["name"] for c in (await client.get("/v1/teams/data/calendars")).json()["items"]] == ["weekends"]
    replaced = await client.put("/v1/teams/data/calendars/weekends", json={"weekdays": ["sun"]})
    assert replaced.status_code == 200, replaced.text
    assert (replaced.json()["weekdays"], replaced.json()["holidays"], replaced.json()["version"]) == (
        ["sun"],
        None,
        2,
    )
    assert (await create(client)).status_code == 409  # the name is taken
    assert (await client.delete("/v1/teams/data/calendars/weekends")).status_code == 204
    assert (await client.get("/v1/teams/data/calendars/weekends")).status_code == 404
    assert (await client.put("/v1/teams/data/calendars/weekends", json={})).status_code == 404


@pytest.mark.parametrize(
    ("body", "field", "code"),
    [
        ({"dates": ["2027-02-30"]}, "dates[0]", "invalid_calendar"),
        ({"dates": ["2027-01-01", "2027-01-01"]}, "dates[1]", "duplicate"),
        ({"ranges": [{"from": "2027-02-03", "to": "2027-02-01"}]}, "ranges[0]", "range_reversed"),
        ({"holidays": {"country": "XX"}}, "holidays.country", "unknown_country"),
        ({"holidays": {"country": "DE", "subdivision": "XX"}}, "holidays.subdivision", "unknown_subdivision"),
    ],
)
async def test_a_bad_calendar_is_a_problem_naming_its_field_and_nothing_is_written(
    client: httpx.AsyncClient, body: dict[str, Any], field: str, code: str
) -> None:
    refused = await create(client, **body)
    assert refused.status_code == 422, refused.text
    assert refused.headers["content-type"] == PROBLEM
    problem = refused.json()
    assert problem["type"] == "urn:cronwheel:problem:invalid-calendar"
    assert [(e["field"], e["code"]) for e in problem["errors"]] == [(field, code)]
    assert (await client.get("/v1/teams/data/calendars")).json()["items"] == []


@pytest.mark.parametrize(
    "body",
    [
        {"dates": ["2027-01-01"] * 1001},
        {"weekdays": 3},
        {"weekdays": ["fri", "xyz"]},
        {"dates": ["2027-1-1"]},
        {"ranges": [{"from": "2027-01-01"}]},
        {"holidays": {"country": "DE", "state": "BY"}},
        {"name": "a b"},
    ],
)
async def test_a_malformed_body_is_refused_by_the_schema(
    client: httpx.AsyncClient, body: dict[str, Any]
) -> None:
    refused = await create(client, **body)
    assert refused.status_code == 422
    assert refused.headers["content-type"] == PROBLEM
    assert (await client.get("/v1/teams/data/calendars")).json()["items"] == []


async def test_another_teams_calendars_are_not_seen(env: Env, client: httpx.AsyncClient) -> None:
    assert (await create(client, team="billing")).status_code == 201
    token = await issue_token(env.store, Scope.READ, Scope.WRITE, team="data", name="data-team")
    async with env.client(token) as data:
        assert (await data.get("/v1/teams/billing/calendars/weekends")).status_code == 404
        assert (await data.get("/v1/teams/billing/calendars")).status_code == 404
        assert (await data.delete("/v1/teams/billing/calendars/weekends")).status_code == 404
        assert (await create(data)).status_code == 201  # its own team: its own name
        assert [c["team"] for c in (await data.get("/v1/teams/data/calendars")).json()["items"]] == ["data"]
        refused = await data.post("/v1/jobs", json=job_body(calendars=["weekends"], team="data"))
        assert refused.status_code == 201  # its own calendar
    reader = await issue_token(env.store, Scope.READ, team="billing", name="reader")
    async with env.client(reader) as read_only:
        assert (await read_only.get("/v1/teams/billing/calendars/weekends")).status_code == 200
        assert (await create(read_only, team="billing", name="other")).status_code == 403


async def test_a_jobs_calendar_fields_round_trip(client: httpx.AsyncClient) -> None:
    await create(client)
    made = await client.post(
        "/v1/jobs", json=job_body(schedule="0 9 L * *", calendars=["weekends"], calendar_shift="previous")
    )
    assert made.status_code == 201, made.text
    job = made.json()
    assert (job["calendars"], job["calendar_shift"]) == (["weekends"], "previous")
    read = (await client.get(f"/v1/jobs/{job['id']}")).json()
    assert (read["calendars"], read["calendar_shift"]) == (["weekends"], "previous")
    assert read["schedule_description"] == (
        "at 09:00 on the last day of the month; "
        "on the days calendar weekends closes, on the previous open day instead"
    )
    patched = await client.patch(f"/v1/jobs/{job['id']}", json={"calendar_shift": "next"})
    assert patched.json()["calendar_shift"] == "next"
    cleared = await client.patch(f"/v1/jobs/{job['id']}", json={"calendars": [], "calendar_shift": "none"})
    assert cleared.json()["schedule_description"] == "at 09:00 on the last day of the month"


@pytest.mark.parametrize(
    ("changes", "field", "code"),
    [
        ({"calendars": ["nothing"]}, "calendars", "calendar_not_found"),
        ({"calendars": ["weekends", "weekends"]}, "calendars[1]", "duplicate"),
        ({"calendar_shift": "next"}, "calendar_shift", "shift_without_calendars"),
        ({"calendars": ["weekends"], "calendar_shift": "next", "schedule": "0 */6 * * *"},
         "calendar_shift", "shift_needs_daily_schedule"),
    ],
)  # fmt: skip
async def test_a_jobs_bad_calendar_fields_are_refused_and_nothing_written(
    client: httpx.AsyncClient, changes: dict[str, Any], field: str, code: str
) -> None:
    await create(client)
    refused = await client.post("/v1/jobs", json=job_body(**changes))
    assert refused.status_code == 422, refused.text
    assert refused.headers["content-type"] == PROBLEM
    assert [(e["field"], e.get("code")) for e in refused.json()["errors"]] == [(field, code)]
    assert (await client.get("/v1/jobs")).json()["items"] == []


async def test_a_calendar_edit_reaches_its_jobs_and_a_listed_one_is_not_deleted(
    env: Env, client: httpx.AsyncClient
) -> None:
    await create(client)
    job = (await client.post("/v1/jobs", json=job_body(calendars=["weekends"]))).json()
    while not env.changes.empty():
        env.changes.get_nowait()
    await client.put("/v1/teams/data/calendars/weekends", json={"weekdays": ["sun"]})
    assert env.changes.get_nowait() == job["id"]  # this process's schedulers reload the job
    assert (await client.get(f"/v1/jobs/{job['id']}")).json()["version"] == job["version"] + 1
    stored = await env.store.get_job(job["id"])
    assert stored.calendar_spec is not None
    assert stored.calendar_spec.weekdays == (7,)
    refused = await client.delete("/v1/teams/data/calendars/weekends")
    assert refused.status_code == 409
    assert refused.headers["content-type"] == PROBLEM
    assert refused.json()["jobs"] == ["nightly"]
    assert (await client.get("/v1/teams/data/calendars/weekends")).status_code == 200


async def test_the_preview_and_a_validation_mark_skipped_and_shifted_fires(client: httpx.AsyncClient) -> None:
    await create(client)
    preview = await client.post(
        "/v1/schedules/preview",
        json={
            "expression": "0 9 * * *", "count": 4, "after": "2027-01-07T12:00:00Z",
            "team": "data", "calendars": ["weekends"], "calendar_shift": "next",
        },
    )  # fmt: skip
    assert preview.status_code == 200, preview.text
    marks = [(f["utc"], f["calendar"], f["shifted_from"]) for f in preview.json()["fires"]]
    assert marks == [
        ("2027-01-08T09:00:00Z", None, None),  # Friday
        ("2027-01-09T09:00:00Z", "skipped", None),
        ("2027-01-10T09:00:00Z", "skipped", None),
        ("2027-01-11T09:00:00Z", "shifted", "2027-01-09T09:00:00Z"),  # Monday's own, and both shifts'
    ]
    plain = await client.post("/v1/schedules/preview", json={"expression": "0 9 * * *", "count": 1})
    assert plain.json()["fires"][0]["calendar"] is None
    no_team = await client.post(
        "/v1/schedules/preview", json={"expression": "0 9 * * *", "calendars": ["weekends"]}
    )
    assert no_team.status_code == 422
    assert [e["field"] for e in no_team.json()["errors"]] == ["team"]
    unknown = await client.post(
        "/v1/schedules/preview", json={"expression": "0 9 * * *", "team": "data", "calendars": ["nothing"]}
    )
    assert unknown.status_code == 422
    checked = await client.post(
        "/v1/jobs:validate", json=job_body(schedule="0 9 * * *", calendars=["weekends"])
    )
    assert checked.status_code == 200, checked.text
    fires = checked.json()["fires"]  # Tuesday to Saturday
    assert [f["calendar"] for f in fires] == [None, None, None, None, "skipped"]


def test_the_weekday_names_are_the_calendars() -> None:
    assert get_args(Weekday) == WEEKDAYS

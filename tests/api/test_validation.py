"""Bad input is refused whole: a 422 problem+json naming every bad field, and nothing written."""

from __future__ import annotations

import dataclasses
from typing import Any

import httpx
import pytest

from cronwheel.store import JobQuery, RunQuery

from .conftest import Env, job_body

PROBLEM = "application/problem+json"
HTTP = {"type": "http", "url": "https://hooks.example.com/x"}

# (changes to a valid body, the field the problem must name)
BAD_FIELDS: list[tuple[dict[str, Any], str]] = [
    ({"team": "data team"}, "team"),
    ({"team": ""}, "team"),
    ({"team": 7}, "team"),
    ({"name": "x" * 101}, "name"),
    ({"name": "nightly/1"}, "name"),
    ({"schedule": "61 * * * *"}, "schedule"),
    ({"schedule": "0 0 30 2 *"}, "schedule"),
    ({"schedule": ""}, "schedule"),
    ({"timezone": "Mars/Olympus_Mons"}, "timezone"),
    ({"dst_gap": "sometimes"}, "dst_gap"),
    ({"dst_fold": "twice"}, "dst_fold"),
    ({"target": {"type": "ftp", "url": "ftp://x"}}, "target"),
    ({"target": {"url": "https://x.example"}}, "target"),
    ({"target": {"type": "http"}}, "target.url"),
    ({"target": {**HTTP, "url": "ftp://hooks.example.com/x"}}, "target.url"),
    ({"target": {**HTTP, "url": "http://10.1.2.3/hook"}}, "target.url"),
    ({"target": {**HTTP, "url": "http://localhost:8080/hook"}}, "target.url"),
    ({"target": {**HTTP, "method": "FETCH"}}, "target.method"),
    ({"target": {**HTTP, "expected_status": [200, 700]}}, "target.expected_status.1"),
    ({"target": {**HTTP, "headers": {"Bad Header": "x"}}}, "target.headers.*"),  # a key not repeated
    ({"target": {**HTTP, "headers": {"X-A": "a\r\nX-B: b"}}}, "target.headers.X-A"),
    ({"target": {**HTTP, "verb": "POST"}}, "target.verb"),
    ({"target": {"type": "command", "argv": ["backup.sh"]}}, "target.type"),
    ({"target": {"type": "command", "argv": []}}, "target.argv"),
    ({"target": {"type": "python", "function": "os:system"}}, "target.function"),
    ({"target": {"type": "python", "function": "not a function"}}, "target.function"),
    ({"description": "d" * 2001}, "description"),
    ({"payload": {"blob": "x" * 70_000}}, "payload"),
    ({"timeout_s": 0}, "timeout_s"),
    ({"timeout_s": "30"}, "timeout_s"),
    ({"timeout_s": 10**9}, "timeout_s"),
    ({"retry": {"max_attempts": 0}}, "retry.max_attempts"),
    ({"retry": {"max_attempts": 101}}, "retry.max_attempts"),
    ({"retry": {"initial_delay_s": -1}}, "retry.initial_delay_s"),
    ({"retry": {"multiplier": 0.5}}, "retry.multiplier"),
    ({"retry": {"initial_delay_s": 60, "max_delay_s": 10}}, "retry.max_delay_s"),
    ({"retry": {"jitter": "yes"}}, "retry.jitter"),
    ({"retry": {"attempts": 3}}, "retry.attempts"),
    ({"misfire": {"policy": "sometimes"}}, "misfire.policy"),
    ({"misfire": {"grace_s": -5}}, "misfire.grace_s"),
    ({"misfire": {"max_catch_up": 0}}, "misfire.max_catch_up"),
    ({"overlap": "maybe"}, "overlap"),
    ({"start_at": "2026-04-01T00:00:00"}, "start_at"),
    ({"start_at": "tomorrow"}, "start_at"),
    ({"start_at": 1775000000}, "start_at"),
    ({"end_at": "2026-04-01"}, "end_at"),
    ({"start_at": "2026-05-01T00:00:00Z", "end_at": "2026-04-01T00:00:00Z"}, "end_at"),
    ({"queue": "fast lane"}, "queue"),
    ({"labels": {"bad key!": "x"}}, "labels.*"),
    ({"labels": {"tier": "v" * 201}}, "labels.tier"),
    ({"labels": {"tier": 1}}, "labels.tier"),
    ({"colour": "blue"}, "colour"),
]


@pytest.mark.parametrize(("changes", "field"), BAD_FIELDS, ids=[field for _, field in BAD_FIELDS])
async def test_bad_field_is_422_naming_it_and_writes_nothing(
    client: httpx.AsyncClient, env: Env, changes: dict[str, Any], field: str
) -> None:
    response = await client.post("/v1/jobs", json=job_body(**changes))
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == PROBLEM
    problem = response.json()
    assert problem["status"] == 422
    assert problem["instance"] == "/v1/jobs"
    assert problem["type"].startswith("urn:cronwheel:problem:")
    assert problem["title"]
    assert problem["detail"]
    assert field in [error["field"] for error in problem["errors"]], problem
    for error in problem["errors"]:
        assert error["message"]
        assert "input" not in error  # refused values are not echoed (they may be secrets)
    assert (await env.store.list_jobs(JobQuery())).items == []
    assert env.changes.empty()


@pytest.mark.parametrize("missing", ["team", "name", "schedule", "target"])
async def test_required_fields(client: httpx.AsyncClient, env: Env, missing: str) -> None:
    body = job_body()
    del body[missing]
    response = await client.post("/v1/jobs", json=body)
    assert response.status_code == 422
    assert [error["field"] for error in response.json()["errors"]] == [missing]


async def test_schedule_errors_name_field_column_and_reason(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/jobs", json=job_body(schedule="0 9 * * MON-FUN"))
    problem = response.json()
    (error,) = problem["errors"]
    assert error["field"] == "schedule"
    assert error["pointer"] == "#/schedule"
    assert error["cron_field"] == "day-of-week"
    assert error["cron_field_index"] == 5
    assert error["column"] == 13  # where FUN starts
    assert error["message"] == "unknown name '…' (expected one of SUN, MON, TUE, WED, THU, FRI, SAT)"
    assert "FUN" not in response.text  # the column says where: the refused text is not repeated
    assert "day-of-week" in problem["detail"]


async def test_every_bad_field_is_reported_at_once(client: httpx.AsyncClient) -> None:
    body = job_body(team="a b", retry={"max_attempts": 0}, overlap="x", extra=1)
    response = await client.post("/v1/jobs", json=body)
    assert response.status_code == 422
    fields = {error["field"] for error in response.json()["errors"]}
    assert fields == {"team", "retry.max_attempts", "overlap", "extra"}
    pointers = {error["pointer"] for error in response.json()["errors"]}
    assert "#/retry/max_attempts" in pointers


async def test_secrets_are_not_echoed(client: httpx.AsyncClient) -> None:
    target = {**HTTP, "headers": {"Authorization": "Bearer topsecret\n"}}
    response = await client.post("/v1/jobs", json=job_body(target=target))
    assert response.status_code == 422
    assert "topsecret" not in response.text


async def test_malformed_json_is_400(client: httpx.AsyncClient, env: Env) -> None:
    response = await client.post(
        "/v1/jobs", content=b'{"team": "data",', headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    assert response.headers["content-type"] == PROBLEM
    assert response.json()["title"] == "Malformed JSON"
    assert (await env.store.list_jobs(JobQuery())).items == []


async def test_body_must_be_an_object(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/jobs", json=[job_body()])
    assert response.status_code == 422
    assert response.json()["errors"][0]["location"] == "body"


async def test_invalid_put_changes_nothing(client: httpx.AsyncClient, env: Env) -> None:
    job = (await client.post("/v1/jobs", json=job_body())).json()
    for body in (job_body(schedule="* * *"), job_body(timezone="Nowhere/City"), job_body(retry={"x": 1})):
        response = await client.put(f"/v1/jobs/{job['id']}", json=body)
        assert response.status_code == 422
    stored = await env.store.get_job(job["id"])
    assert (stored.version, stored.schedule, stored.timezone) == (1, "0 3 * * *", "Europe/Berlin")


async def test_bad_trigger_writes_no_run(client: httpx.AsyncClient, env: Env) -> None:
    job = (await client.post("/v1/jobs", json=job_body())).json()
    url = f"/v1/jobs/{job['id']}/trigger"
    too_big = await client.post(url, json={"payload": "x" * 70_000})
    assert too_big.status_code == 422
    assert too_big.json()["errors"][0]["field"] == "payload"
    unknown = await client.post(url, json={"payload": 1, "priority": "high"})
    assert unknown.status_code == 422
    long_key = await client.post(url, headers={"Idempotency-Key": "k" * 201})
    assert long_key.status_code == 422
    assert long_key.json()["errors"][0] == {
        "location": "header", "field": "idempotency-key", "message": long_key.json()["errors"][0]["message"],
        "code": "string_too_long",
    }  # fmt: skip
    assert (await env.store.list_runs(RunQuery(job_id=job["id"]))).items == []
    assert env.queue.published == []


async def test_bad_pause_and_resume_bodies(client: httpx.AsyncClient, env: Env) -> None:
    job = (await client.post("/v1/jobs", json=job_body())).json()
    bad_missed = await client.post(f"/v1/jobs/{job['id']}/resume", json={"missed": "all"})
    assert bad_missed.status_code == 422
    assert bad_missed.json()["errors"][0]["field"] == "missed"
    bad_note = await client.post(f"/v1/jobs/{job['id']}/pause", json={"note": 5})
    assert bad_note.status_code == 422
    assert (await env.store.get_job(job["id"])).paused is False


# Every kind of problem at once: schema (team, retry), schedule, zone, target policy.
ONE_ROUND: dict[str, Any] = {
    "team": "a b",
    "schedule": "61 * * * *",
    "timezone": "Mars/Olympus_Mons",
    "target": {**HTTP, "url": "http://10.1.2.3/hook"},
    "retry": {"max_attempts": 0},
}
ONE_ROUND_FIELDS = {"team", "schedule", "timezone", "target.url", "retry.max_attempts"}


async def test_schema_schedule_zone_and_policy_errors_come_in_one_round(
    client: httpx.AsyncClient, env: Env
) -> None:
    job = (await client.post("/v1/jobs", json=job_body())).json()
    for method, url in (("POST", "/v1/jobs"), ("PUT", f"/v1/jobs/{job['id']}")):
        response = await client.request(method, url, json=job_body(**ONE_ROUND))
        assert response.status_code == 422, (method, response.text)
        problem = response.json()
        assert problem["type"] == "urn:cronwheel:problem:validation"
        assert {error["field"] for error in problem["errors"]} == ONE_ROUND_FIELDS, method
        (schedule,) = [error for error in problem["errors"] if error["field"] == "schedule"]
        assert (schedule["cron_field"], schedule["column"], schedule["code"]) == (
            "minute",
            1,
            "invalid_schedule",
        )
        (target,) = [error for error in problem["errors"] if error["field"] == "target.url"]
        assert "non-public address" in target["message"]
        assert target["code"] == "target_refused"
    patch = await client.patch(f"/v1/jobs/{job['id']}", json={**ONE_ROUND, "name": None})
    assert patch.status_code == 422
    assert {error["field"] for error in patch.json()["errors"]} == ONE_ROUND_FIELDS | {"name"}
    stored = await env.store.get_job(job["id"])
    assert (stored.version, stored.team, stored.schedule) == (1, "data", "0 3 * * *")
    assert len((await env.store.list_jobs(JobQuery())).items) == 1


async def test_a_bad_zone_does_not_hide_a_bad_expression(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/v1/jobs", json=job_body(schedule="0 9 * * MON-FUN", timezone="Nowhere/City")
    )
    problem = response.json()
    assert problem["type"] == "urn:cronwheel:problem:invalid-schedule"
    assert {error["field"] for error in problem["errors"]} == {"timezone", "schedule"}
    assert problem["detail"] == "2 invalid fields: timezone, schedule"


async def test_policy_errors_name_their_field(client: httpx.AsyncClient, env: Env) -> None:
    refused = await client.post("/v1/jobs", json=job_body(target={"type": "python", "function": "os:system"}))
    assert refused.json()["type"] == "urn:cronwheel:problem:target-refused"
    assert [error["field"] for error in refused.json()["errors"]] == ["target.function"]
    assert "not allowed" in refused.json()["detail"]
    env.service.policy = dataclasses.replace(env.service.policy, queues=("default",))
    queue = await client.post("/v1/jobs", json=job_body(queue="batch", team="a b"))
    assert {error["field"] for error in queue.json()["errors"]} == {"team", "queue"}
    assert "no worker serves queue 'batch'" in queue.json()["errors"][1]["message"]


async def test_query_strings_cannot_multiply_the_work(client: httpx.AsyncClient, env: Env) -> None:
    """1,000 label filters answered 503 with Retry-After (SQLite: "Expression tree is too large"):
    the client's input reported as an outage. Now a precise 422 on the query field."""
    await client.post("/v1/jobs", json=job_body())
    many = "&".join(f"label=k{i}=v" for i in range(1000))
    for path in (f"/v1/jobs?{many}", "/v1/jobs?" + "&".join(["label=tier=gold"] * 65)):
        response = await client.get(path)
        assert response.status_code == 422, response.text
        assert "retry-after" not in response.headers
        [error] = response.json()["errors"]
        assert (error["location"], error["field"]) == ("query", "label")
        assert "at most 64" in error["message"]
    at_most = await client.get("/v1/jobs?" + "&".join(["label=tier=gold"] * 64))
    assert (at_most.status_code, len(at_most.json()["items"])) == (200, 1)
    too_long = await client.get("/v1/jobs", params={"label": "k=" + "v" * 400})
    assert too_long.status_code == 422
    states = "&".join(["state=SUCCESS"] * 1000)
    for path in (f"/v1/runs?{states}", f"/v1/jobs/{'0' * 26}/runs?{states}"):
        response = await client.get(path)
        assert response.status_code == 422, response.text
        assert response.json()["errors"][0]["field"] == "state"

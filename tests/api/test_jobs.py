"""Jobs over the REST API: create, read, list with filters and pages, replace, patch, delete,
conditional writes (If-Match -> 412) and name conflicts (409)."""

from __future__ import annotations

from typing import Any

import httpx

from cronwheel.store import JobQuery

from .conftest import Env, job_body

PROBLEM = "application/problem+json"


async def create(client: httpx.AsyncClient, **changes: Any) -> dict[str, Any]:
    response = await client.post("/v1/jobs", json=job_body(**changes))
    assert response.status_code == 201, response.text
    data: dict[str, Any] = response.json()
    return data


async def test_create_returns_the_job_with_server_fields(client: httpx.AsyncClient, env: Env) -> None:
    response = await client.post("/v1/jobs", json=job_body())
    assert response.status_code == 201
    job = response.json()
    assert response.headers["etag"] == '"1"'
    assert response.headers["location"] == f"/v1/jobs/{job['id']}"
    assert job["version"] == 1
    assert job["created_at"] == job["updated_at"] == "2026-03-02T12:00:00Z"
    # 03:00 in Berlin (CET, +01:00) is 02:00 UTC, the day after the clock's noon
    assert job["next_run_at"] == "2026-03-03T02:00:00Z"
    assert job["paused"] is False
    assert job["last_run"] is None
    assert job["retry"] == {
        "max_attempts": 1, "initial_delay_s": 1.0, "multiplier": 2.0, "max_delay_s": 300.0, "jitter": True,
    }  # fmt: skip
    assert job["misfire"] == {"policy": "skip", "grace_s": 60.0, "max_catch_up": 10}
    assert job["target"] == {
        "type": "http",
        "url": "https://hooks.example.com/nightly",
        "method": "POST",
        "headers": {"X-Team": "data"},
        "expected_status": [],
        "signing_secret": None,
    }
    assert job["plain_values"] == ["target.headers.X-Team"]  # held in clear: reported as such
    assert job["schedule_description"] == "at 03:00 every day"
    assert env.changes.get_nowait() == job["id"]
    stored = await env.store.get_job(job["id"])
    assert (stored.team, stored.name, stored.labels) == ("data", "nightly", (("tier", "gold"),))


async def test_create_every_field(client: httpx.AsyncClient, env: Env) -> None:
    body = job_body(
        schedule="*/15 9-17 * * MON-FRI",
        timezone="America/New_York",
        dst_gap="skip",
        dst_fold="both",
        target={"type": "python", "function": "myapp.jobs:rollup"},
        description="rolls up",
        payload={"tables": ["a", "b"], "n": 3},
        timeout_s=120,
        retry={"max_attempts": 5, "initial_delay_s": 2, "multiplier": 3, "max_delay_s": 60, "jitter": False},
        misfire={"policy": "catch_up", "grace_s": 5, "max_catch_up": 3},
        overlap="forbid",
        start_at="2026-04-01T00:00:00+02:00",
        end_at="2026-12-31T23:59:59Z",
        queue="batch",
        labels={"tier": "gold", "app.io/owner": "ana"},
    )
    job = await create(client, **body)
    for key in ("schedule", "timezone", "dst_gap", "dst_fold", "target", "description", "payload"):
        assert job[key] == body[key]
    assert job["timeout_s"] == 120.0
    assert job["retry"]["max_attempts"] == 5
    assert job["misfire"] == {"policy": "catch_up", "grace_s": 5.0, "max_catch_up": 3}
    assert job["overlap"] == "forbid"
    assert job["start_at"] == "2026-03-31T22:00:00Z"  # stored in UTC
    assert job["next_run_at"] == "2026-04-01T13:00:00Z"  # 09:00 EDT on the first weekday after start
    assert job["queue"] == "batch"
    assert job["labels"] == {"tier": "gold", "app.io/owner": "ana"}


async def test_get_and_404(client: httpx.AsyncClient) -> None:
    job = await create(client)
    response = await client.get(f"/v1/jobs/{job['id']}")
    assert response.status_code == 200
    assert response.headers["etag"] == '"1"'
    assert response.json() == job
    missing = await client.get("/v1/jobs/nope")
    assert missing.status_code == 404
    assert missing.headers["content-type"] == PROBLEM
    problem = missing.json()
    assert problem["status"] == 404
    assert problem["instance"] == "/v1/jobs/nope"
    assert "nope" in problem["detail"]


async def test_list_filters(client: httpx.AsyncClient, env: Env) -> None:
    a = await create(client, name="a", team="data", labels={"tier": "gold", "env": "prod"})
    b = await create(client, name="b", team="data", labels={"tier": "silver", "env": "prod"})
    c = await create(client, name="c", team="web", labels={"tier": "gold"})
    await client.post(f"/v1/jobs/{b['id']}/pause", json={"note": "maintenance"})
    await client.post(f"/v1/jobs/{c['id']}/trigger")

    async def names(query: str) -> list[str]:
        response = await client.get(f"/v1/jobs?{query}")
        assert response.status_code == 200, response.text
        return [job["name"] for job in response.json()["items"]]

    assert await names("") == ["a", "b", "c"]
    assert await names("team=data") == ["a", "b"]
    assert await names("label=tier=gold") == ["a", "c"]
    assert await names("label=tier=gold&label=env=prod") == ["a"]
    assert await names("paused=true") == ["b"]
    assert await names("paused=false&team=data") == ["a"]
    assert await names("last_state=PENDING") == ["c"]
    assert await names("name=a") == ["a"]
    listed = (await client.get("/v1/jobs?name=c")).json()["items"][0]
    assert listed["last_run"]["state"] == "PENDING"
    assert listed["last_run"]["slot"] == "2026-03-02T12:00:00Z"
    assert a["id"] in [job["id"] for job in (await client.get("/v1/jobs")).json()["items"]]


async def test_list_bad_filters_are_422(client: httpx.AsyncClient) -> None:
    for query, field in [
        ("label=tier", "label"),
        ("last_state=DONE", "last_state"),
        ("limit=0", "limit"),
        ("limit=5000", "limit"),
        ("paused=perhaps", "paused"),
        ("cursor=garbage", "cursor"),
    ]:
        response = await client.get(f"/v1/jobs?{query}")
        assert response.status_code == 422, query
        assert response.headers["content-type"] == PROBLEM
        assert [error["field"] for error in response.json()["errors"]] == [field], query
        assert response.json()["errors"][0]["location"] == "query"


async def test_cursor_pagination_walks_every_job_once(client: httpx.AsyncClient) -> None:
    created = [(await create(client, name=f"job-{i:02d}"))["id"] for i in range(7)]
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        params = {"limit": "3", **({"cursor": cursor} if cursor else {})}
        page = (await client.get("/v1/jobs", params=params)).json()
        seen += [job["id"] for job in page["items"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == 3
    assert seen == created


async def test_put_replaces_the_whole_definition(client: httpx.AsyncClient, env: Env) -> None:
    job = await create(client, payload={"x": 1})
    body = job_body(schedule="0 4 * * *")  # no payload: it goes back to null
    del body["labels"]
    response = await client.put(f"/v1/jobs/{job['id']}", json=body, headers={"If-Match": '"1"'})
    assert response.status_code == 200, response.text
    updated = response.json()
    assert response.headers["etag"] == '"2"'
    assert updated["version"] == 2
    assert updated["schedule"] == "0 4 * * *"
    assert updated["payload"] is None
    assert updated["labels"] == {}
    assert updated["next_run_at"] == "2026-03-03T03:00:00Z"
    assert updated["created_at"] == job["created_at"]


async def test_put_with_stale_if_match_is_412_and_changes_nothing(
    client: httpx.AsyncClient, env: Env
) -> None:
    job = await create(client)
    await client.patch(f"/v1/jobs/{job['id']}", json={"description": "v2"})
    response = await client.put(
        f"/v1/jobs/{job['id']}", json=job_body(schedule="0 5 * * *"), headers={"If-Match": '"1"'}
    )
    assert response.status_code == 412
    assert response.headers["content-type"] == PROBLEM
    assert "version 2" in response.json()["detail"]
    stored = await env.store.get_job(job["id"])
    assert (stored.version, stored.schedule) == (2, "0 3 * * *")
    ok = await client.put(f"/v1/jobs/{job['id']}", json=job_body(), headers={"If-Match": 'W/"2"'})
    assert ok.status_code == 200


async def test_if_match_on_every_write(client: httpx.AsyncClient, env: Env) -> None:
    job = await create(client)
    url = f"/v1/jobs/{job['id']}"
    stale = {"If-Match": '"7"'}
    assert (await client.patch(url, json={"description": "x"}, headers=stale)).status_code == 412
    assert (await client.post(f"{url}/pause", json={}, headers=stale)).status_code == 412
    assert (await client.post(f"{url}/resume", headers=stale)).status_code == 412
    assert (await client.delete(url, headers=stale)).status_code == 412
    assert (await env.store.get_job(job["id"])).version == 1
    assert (await client.delete(url, headers={"If-Match": "*"})).status_code == 204


async def test_bad_if_match_is_400(client: httpx.AsyncClient) -> None:
    job = await create(client)
    response = await client.put(f"/v1/jobs/{job['id']}", json=job_body(), headers={"If-Match": "yesterday"})
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "If-Match"


async def test_name_conflicts_are_409(client: httpx.AsyncClient, env: Env) -> None:
    first = await create(client, name="one")
    again = await client.post("/v1/jobs", json=job_body(name="one"))
    assert again.status_code == 409
    assert again.headers["content-type"] == PROBLEM
    assert "one" in again.json()["detail"]
    other_team = await client.post("/v1/jobs", json=job_body(name="one", team="web"))
    assert other_team.status_code == 201
    second = await create(client, name="two")
    rename = await client.put(
        f"/v1/jobs/{second['id']}", json=job_body(name="one"), headers={"If-Match": '"1"'}
    )
    assert rename.status_code == 409  # the version matched: this is a name conflict, not a 412
    patch = await client.patch(f"/v1/jobs/{second['id']}", json={"name": "one"})
    assert patch.status_code == 409
    assert (await env.store.get_job(second["id"])).name == "two"
    assert (await env.store.get_job(first["id"])).version == 1


async def test_patch_changes_only_given_fields(client: httpx.AsyncClient) -> None:
    job = await create(client, retry={"max_attempts": 4, "max_delay_s": 30}, payload={"a": 1})
    response = await client.patch(
        f"/v1/jobs/{job['id']}",
        json={"retry": {"initial_delay_s": 5}, "timezone": "UTC", "payload": None},
        headers={"If-Match": '"1"'},
    )
    assert response.status_code == 200, response.text
    patched = response.json()
    assert patched["retry"]["max_attempts"] == 4  # merged, not reset
    assert patched["retry"]["initial_delay_s"] == 5.0
    assert patched["retry"]["max_delay_s"] == 30.0
    assert patched["timezone"] == "UTC"
    assert patched["payload"] is None
    assert patched["next_run_at"] == "2026-03-03T03:00:00Z"  # timing changed: recomputed
    assert patched["labels"] == job["labels"]
    assert patched["target"] == job["target"]
    assert response.headers["etag"] == '"2"'


async def test_patch_refuses_null_for_required_fields_and_bad_merges(
    client: httpx.AsyncClient, env: Env
) -> None:
    job = await create(client, retry={"initial_delay_s": 10, "max_delay_s": 20})
    url = f"/v1/jobs/{job['id']}"
    null = await client.patch(url, json={"team": None})
    assert null.status_code == 422
    assert null.json()["errors"][0]["field"] == "team"
    merged = await client.patch(url, json={"retry": {"max_delay_s": 5}})  # below the stored initial
    assert merged.status_code == 422
    assert merged.json()["errors"][0]["field"] == "retry.max_delay_s"
    bad_cron = await client.patch(url, json={"schedule": "0 25 * * *"})
    assert bad_cron.status_code == 422
    assert bad_cron.json()["errors"][0]["cron_field"] == "hour"
    assert (await env.store.get_job(job["id"])).version == 1


async def test_delete(client: httpx.AsyncClient, env: Env) -> None:
    job = await create(client)
    response = await client.delete(f"/v1/jobs/{job['id']}", headers={"If-Match": '"1"'})
    assert response.status_code == 204
    assert (await client.get(f"/v1/jobs/{job['id']}")).status_code == 404
    assert (await client.delete(f"/v1/jobs/{job['id']}")).status_code == 404
    assert (await env.store.list_jobs(JobQuery())).items == []
    again = await client.post("/v1/jobs", json=job_body())  # the name is free again
    assert again.status_code == 201


async def test_an_edit_that_changes_nothing_writes_nothing(client: httpx.AsyncClient, env: Env) -> None:
    """Other clients' If-Match still holds after a PATCH {} or a PUT of the same definition."""
    job = await create(client, payload={"a": 1}, retry={"max_attempts": 3})
    env.changes.get_nowait()
    url = f"/v1/jobs/{job['id']}"
    env.clock.advance(60)
    same_put = job_body(payload={"a": 1}, retry={"max_attempts": 3})
    for method, body in [
        ("PATCH", {}),
        ("PATCH", {"description": "", "retry": {"max_attempts": 3}, "timezone": "Europe/Berlin"}),
        ("PUT", same_put),
    ]:
        response = await client.request(method, url, json=body, headers={"If-Match": '"1"'})
        assert response.status_code == 200, (method, body, response.text)
        assert response.headers["etag"] == '"1"', (method, body)
        assert response.json() == job
    assert env.changes.empty()
    stored = await env.store.get_job(job["id"])
    assert (stored.version, stored.updated_at) == (1, stored.created_at)
    changed = await client.patch(url, json={"description": "now different"}, headers={"If-Match": '"1"'})
    assert changed.headers["etag"] == '"2"'


async def test_a_job_that_would_never_fire_is_refused(client: httpx.AsyncClient, env: Env) -> None:
    # the clock is 2026-03-02T12:00Z; 03:00 Berlin is 02:00Z
    cases = [
        ({"end_at": "2026-03-01T00:00:00Z"}, "end_at", "end_at 2026-03-01T00:00:00Z has passed"),
        (
            {"start_at": "2026-03-05T10:00:00Z", "end_at": "2026-03-05T11:00:00Z"},
            "end_at",
            "no fire time of '0 3 * * *' (Europe/Berlin) falls between 2026-03-05T10:00:00Z and end_at "
            "2026-03-05T11:00:00Z (the next is 2026-03-06T02:00:00Z)",
        ),
    ]
    for changes, field, reason in cases:
        response = await client.post("/v1/jobs", json=job_body(**changes))
        assert response.status_code == 422, response.text
        problem = response.json()
        assert problem["type"] == "urn:cronwheel:problem:no-slot"
        assert problem["detail"].startswith(reason)
        assert problem["detail"].endswith("the job would never fire")
        assert [(error["field"], error["code"]) for error in problem["errors"]] == [(field, "no_slot")]
    assert (await env.store.list_jobs(JobQuery())).items == []
    fires_once = await client.post("/v1/jobs", json=job_body(end_at="2026-03-03T02:00:00Z"))
    assert fires_once.status_code == 201
    assert fires_once.json()["next_run_at"] == "2026-03-03T02:00:00Z"


async def test_a_timing_edit_that_leaves_no_slot_is_refused(client: httpx.AsyncClient, env: Env) -> None:
    job = await create(client, end_at="2026-03-03T02:00:00Z")
    url = f"/v1/jobs/{job['id']}"
    past = await client.patch(url, json={"end_at": "2026-03-02T11:00:00Z"})
    assert past.status_code == 422
    assert past.json()["type"] == "urn:cronwheel:problem:no-slot"
    assert [error["field"] for error in past.json()["errors"]] == ["end_at"]
    later = await client.put(url, json=job_body(schedule="0 4 * * *", end_at="2026-03-03T02:00:00Z"))
    assert later.status_code == 422  # 04:00 Berlin is after end_at
    assert "the next is 2026-03-03T03:00:00Z" in later.json()["detail"]
    assert (await env.store.get_job(job["id"])).version == 1
    env.clock.advance(86_400)  # the window has passed: the job is idle
    idle = await client.patch(url, json={"description": "kept for the record"})
    assert idle.status_code == 200  # not a timing edit: allowed
    assert idle.json()["next_run_at"] == "2026-03-03T02:00:00Z"  # its cursor is the scheduler's

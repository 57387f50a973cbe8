"""``GET /v1/audit`` and what the API writes to the audit log: every change with its actor, team,
target and redacted before/after; refused requests (401, 403, 404 at a team's wall) coalesced;
and walls: a team's admin reads only its team's entries, never another team's or no team's."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from cronwheel.api.app import ApiServices, create_app
from cronwheel.api.callers.auditing import BUDGET, RefusalSampler
from cronwheel.auth.identity import Scope
from cronwheel.clock import ManualClock
from cronwheel.secrets.crypto import Keyring, new_key
from cronwheel.secrets.service import SecretService

from .conftest import SERVED, START, Env, bearer, issue_token, job_body

SECRET_VALUE = "sk_live_do-not-log-me"


@pytest.fixture
async def app_env(env: Env) -> AsyncIterator[tuple[Env, httpx.AsyncClient]]:
    """The conftest's app with team secrets, and its admin client (of every team)."""
    secrets = SecretService(env.store, Keyring([new_key("k1")]), env.clock)
    services = ApiServices(env.store, env.service, env.clock, env.readiness, access=SERVED, secrets=secrets)
    env.app = create_app(services)
    async with env.client(env.admin_token) as http:
        yield env, http


async def entries(http: httpx.AsyncClient, **query: Any) -> list[dict[str, Any]]:
    response = await http.get("/v1/audit", params={"limit": 1000, **query})
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


async def admin_id(env: Env) -> str:
    return env.admin_token.split("_")[1]


async def test_every_change_is_recorded_with_actor_team_target_and_redacted_snapshots(
    app_env: tuple[Env, httpx.AsyncClient],
) -> None:
    env, http = app_env
    assert (await http.put("/v1/teams/data/secrets/api-key", json={"value": SECRET_VALUE})).status_code == 201
    body = job_body()
    body["target"]["headers"]["X-Team"] = "s3cret"  # a plain value (not a credential by its name)
    body["target"]["headers"]["X-Key"] = {"secret": "api-key"}
    created = (await http.post("/v1/jobs", json=body)).json()
    job = f"/v1/jobs/{created['id']}"
    assert (await http.patch(job, json={"description": "v2"})).status_code == 200
    assert (await http.post(job + "/pause", json={"note": "n"})).status_code == 200
    assert (await http.post(job + "/resume", json={})).status_code == 200
    run = (await http.post(job + "/trigger", json={})).json()
    assert (await http.delete(job)).status_code == 204
    token = (await http.post("/v1/tokens", json={"name": "ci", "team": "data", "scopes": ["read"]})).json()
    assert (await http.delete(f"/v1/tokens/{token['id']}")).status_code == 204
    assert (await http.delete("/v1/teams/data/secrets/api-key")).status_code == 204
    assert (await http.post("/v1/secrets/reencrypt")).status_code == 200

    found = list(reversed(await entries(http)))
    assert [e["action"] for e in found] == [
        "secret.set", "job.create", "job.update", "job.pause", "job.resume", "job.trigger", "job.delete",
        "token.create", "token.revoke", "secret.delete", "secrets.reencrypt",
    ]  # fmt: skip
    me = await admin_id(env)
    for e in found:
        assert (e["actor_kind"], e["actor_id"], e["actor_name"]) == ("token", me, "test-admin")
        assert e["outcome"] == "ok"
        assert e["at"] == "2026-03-02T12:00:00Z"
        assert e["client"] == "127.0.0.1"
    by_action = {e["action"]: e for e in found}
    assert [by_action[a]["team"] for a in ("job.create", "token.create", "secret.set")] == ["data"] * 3
    assert by_action["secrets.reencrypt"]["team"] is None  # every team's
    create, update = by_action["job.create"], by_action["job.update"]
    assert (create["target_kind"], create["target_id"], create["target_name"]) == (
        "job",
        created["id"],
        "nightly",
    )
    assert create["before"] is None
    assert dict(create["after"]["target"]["headers"]) == {
        "X-Team": "(redacted)",
        "X-Key": {"secret": "api-key"},
    }
    assert update["before"] == create["after"]
    assert update["after"]["description"] == "v2"
    assert by_action["job.trigger"]["after"] == {"run_id": run["id"], "idempotency_key": None}
    assert by_action["job.delete"]["after"] is None
    assert by_action["job.delete"]["before"]["version"] == 4
    assert by_action["token.create"]["after"]["scopes"] == ["read"]
    assert by_action["secret.set"]["after"]["key_id"] == "k1"
    everything = json.dumps(found)
    assert SECRET_VALUE not in everything
    assert "s3cret" not in everything
    assert token["token"] not in everything


async def test_a_team_admin_reads_only_its_team_entries(app_env: tuple[Env, httpx.AsyncClient]) -> None:
    env, http = app_env
    for team in ("data", "other"):
        assert (await http.post("/v1/jobs", json=job_body(team=team))).status_code == 201
    async with env.client() as anonymous:
        assert (await anonymous.get("/v1/jobs")).status_code == 401  # an entry of no team
    data_admin = await issue_token(env.store, Scope.ADMIN, team="data", name="data-admin")
    async with env.client(data_admin) as team_http:
        mine = await entries(team_http)
        assert [(e["action"], e["team"]) for e in mine] == [("job.create", "data")]
        assert await entries(team_http, team="other") == []  # another team's filter: nothing
        assert await entries(team_http, action="auth") == []
    assert {e["team"] for e in await entries(http)} == {"data", "other", None}  # every team's admin


async def test_reading_takes_an_admin_token(app_env: tuple[Env, httpx.AsyncClient]) -> None:
    env, _ = app_env
    reader = await issue_token(env.store, Scope.READ, team="data", name="reader")
    async with env.client(reader) as http:
        refused = await http.get("/v1/audit")
    assert refused.status_code == 403
    assert refused.headers["content-type"] == "application/problem+json"


async def test_refusals_are_recorded_and_coalesced(app_env: tuple[Env, httpx.AsyncClient]) -> None:
    env, http = app_env
    job = (await http.post("/v1/jobs", json=job_body(team="data"))).json()
    other = await issue_token(env.store, Scope.ADMIN, team="other", name="prober")
    reader = await issue_token(env.store, Scope.READ, team="data", name="reader")
    async with env.client() as anonymous, env.client(other) as prober, env.client(reader) as read_only:
        for _ in range(3):
            assert (await anonymous.get("/v1/jobs", headers=bearer("cw_nope_bad"))).status_code == 401
        hidden = await prober.get(f"/v1/jobs/{job['id']}")
        missing = await prober.get("/v1/jobs/no-such-job")
        assert (await read_only.delete(f"/v1/jobs/{job['id']}")).status_code == 403
    assert hidden.status_code == missing.status_code == 404
    assert hidden.json()["title"] == missing.json()["title"]  # the wall answers as a missing job

    refusals = await entries(http, action="auth")
    by_action = {e["action"]: e for e in refusals}
    assert len(refusals) == 3  # three 401s from one address: one entry
    unauthenticated = by_action["auth.unauthenticated"]
    assert (unauthenticated["actor_kind"], unauthenticated["actor_id"], unauthenticated["team"]) == (
        "anonymous", None, None,
    )  # fmt: skip
    assert (unauthenticated["status"], unauthenticated["target_id"]) == (401, "GET /v1/jobs")
    wall = by_action["auth.hidden"]  # the missing job is no wall: not recorded
    assert (wall["actor_name"], wall["team"], wall["status"]) == ("prober", None, 404)
    assert wall["target_id"] == f"GET /v1/jobs/{job['id']}"
    forbidden = by_action["auth.forbidden"]
    assert (forbidden["actor_name"], forbidden["team"], forbidden["status"]) == ("reader", "data", 403)

    env.clock.advance(61)  # a new window: the next one says how many it stands for
    async with env.client() as anonymous:
        await anonymous.get("/v1/jobs", headers=bearer("cw_nope_bad"))
    latest = (await entries(http, action="auth.unauthenticated"))[0]
    assert latest["detail"].endswith("and 2 alike since the last one recorded")


def test_the_sampler_keeps_a_budget_per_window_whatever_the_keys() -> None:
    clock = ManualClock(START)
    sampler = RefusalSampler(clock, window=60, budget=BUDGET, max_keys=50)
    admitted = [sampler.admit(("401", f"10.0.{n // 256}.{n % 256}")) for n in range(1000)]
    assert sum(a is not None for a in admitted) == BUDGET  # a thousand addresses: BUDGET writes
    assert sampler.admit(("401", "10.0.0.0")) is None  # same key, same window
    clock.advance(60)
    assert sampler.admit(("401", "10.9.9.9")) == 0  # the budget is back


async def test_pages_filters_and_refusals_of_bad_input(app_env: tuple[Env, httpx.AsyncClient]) -> None:
    env, http = app_env
    for n in range(5):
        env.clock.advance(1)
        assert (await http.post("/v1/jobs", json=job_body(f"job-{n}"))).status_code == 201
    seen, cursor = [], None
    while True:
        page = (
            await http.get("/v1/audit", params={"limit": 2, **({"cursor": cursor} if cursor else {})})
        ).json()
        seen += [e["target_name"] for e in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [f"job-{n}" for n in reversed(range(5))]
    assert [e["target_name"] for e in await entries(http, target="job-3")] == ["job-3"]
    assert len(await entries(http, since="2026-03-02T12:00:02Z", until="2026-03-02T12:00:04Z")) == 2
    me = await admin_id(env)
    assert len(await entries(http, actor=me, action="job.create")) == 5
    for query in ({"cursor": "bm90LWEtY3Vyc29y"}, {"action": "JOB"}, {"since": "yesterday"}, {"limit": 1001}):
        response = await http.get("/v1/audit", params=query)
        assert response.status_code == 422, query
        assert response.headers["content-type"] == "application/problem+json"


async def test_there_is_no_route_that_changes_an_entry(app_env: tuple[Env, httpx.AsyncClient]) -> None:
    _, http = app_env
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        assert (await http.request(method, "/v1/audit")).status_code == 405


async def test_a_job_moved_to_another_team_is_recorded_under_the_team_it_left(
    app_env: tuple[Env, httpx.AsyncClient],
) -> None:
    _, http = app_env
    created = (await http.post("/v1/jobs", json=job_body(team="data"))).json()
    assert (await http.patch(f"/v1/jobs/{created['id']}", json={"team": "other"})).status_code == 200
    (moved,) = await entries(http, action="job.update")
    assert moved["team"] == "data"
    assert (moved["before"]["team"], moved["after"]["team"]) == ("data", "other")
    assert (await http.patch(f"/v1/jobs/{created['id']}", json={"team": "other"})).status_code == 200
    assert len(await entries(http, action="job.update")) == 1  # the same definition again: no entry

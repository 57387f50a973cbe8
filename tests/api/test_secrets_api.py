"""Team secrets over the API (``/v1/teams/{team}/secrets``), and jobs that refer to them.

Values are write-only: no response ever holds one, and the database holds them sealed. A job
that refers to a secret its team does not have is refused whole (422 naming the field). Each
route asks the caller first: another team's secrets answer 404, a missing scope 403."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from cronwheel.api.app import ApiServices, create_app
from cronwheel.api.callers.auth import current_caller
from cronwheel.auth.identity import Caller, CallerKind, Scope
from cronwheel.jobs.service import TargetPolicy
from cronwheel.secrets.crypto import Keyring, new_key
from cronwheel.secrets.service import SecretService
from cronwheel.secrets.signing import new_signing_secret
from cronwheel.store import JobQuery

from .conftest import SERVED, Env, bearer, job_body

PROBLEM = "application/problem+json"
VALUE = "sk_live_9c1f-billing-token-0042"
K1 = new_key("k1")


class Recorder(httpx.AsyncClient):
    """An API client that keeps every response body, to prove none holds a value."""

    bodies: list[bytes]

    async def send(self, request: httpx.Request, **kwargs: Any) -> httpx.Response:
        response = await super().send(request, **kwargs)
        self.bodies.append(await response.aread())
        return response


def build(env: Env, keyring: Keyring | None) -> FastAPI:
    secrets = SecretService(env.store, keyring, env.clock)
    return create_app(
        ApiServices(env.store, env.service, env.clock, env.readiness, access=SERVED, secrets=secrets)
    )


def admin(env: Env) -> dict[str, str]:
    """An admin token of every team (``as_caller`` overrides who that is, where a test says)."""
    return bearer(env.admin_token)


@pytest.fixture
def app(env: Env) -> FastAPI:
    return build(env, Keyring([K1]))


@pytest.fixture
async def api(app: FastAPI, env: Env) -> AsyncIterator[Recorder]:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with Recorder(transport=transport, base_url="http://cronwheel.test", headers=admin(env)) as http:
        http.bodies = []
        yield http
        assert not any(VALUE.encode() in body for body in http.bodies), "a response held a secret's value"


async def put(api: httpx.AsyncClient, ref: str, value: str = VALUE) -> httpx.Response:
    team, name = ref.split("/")
    return await api.put(f"/v1/teams/{team}/secrets/{name}", json={"value": value})


def as_caller(app: FastAPI, scopes: set[Scope], teams: set[str] | None) -> None:
    caller = Caller(
        CallerKind.TOKEN, "t1", "test token", frozenset(scopes), None if teams is None else frozenset(teams)
    )

    async def override() -> Caller:
        return caller

    app.dependency_overrides[current_caller] = override


# -- the secrets ---------------------------------------------------------------------------------


async def test_set_replace_show_list_delete_and_never_a_value(api: Recorder, env: Env) -> None:
    created = await put(api, "billing/api-key")
    assert created.status_code == 201
    assert created.headers["location"] == "/v1/teams/billing/secrets/api-key"
    body = created.json()
    assert body == {
        "team": "billing",
        "name": "api-key",
        "key_id": "k1",
        "created_at": "2026-03-02T12:00:00Z",
        "updated_at": "2026-03-02T12:00:00Z",
    }
    env.clock.advance(60)
    replaced = await put(api, "billing/api-key", VALUE + "-v2")
    assert replaced.status_code == 200
    assert replaced.json()["updated_at"] == "2026-03-02T12:01:00Z"
    assert replaced.json()["created_at"] == "2026-03-02T12:00:00Z"
    await put(api, "billing/db-password")
    shown = await api.get("/v1/teams/billing/secrets/api-key")
    assert shown.json() == replaced.json()
    listed = await api.get("/v1/teams/billing/secrets", params={"limit": 1})
    assert [item["name"] for item in listed.json()["items"]] == ["api-key"]
    rest = await api.get("/v1/teams/billing/secrets", params={"cursor": listed.json()["next_cursor"]})
    assert [item["name"] for item in rest.json()["items"]] == ["db-password"]
    assert (await api.delete("/v1/teams/billing/secrets/api-key")).status_code == 204
    gone = await api.get("/v1/teams/billing/secrets/api-key")
    assert gone.status_code == 404
    assert gone.headers["content-type"] == PROBLEM
    assert (await api.delete("/v1/teams/billing/secrets/api-key")).status_code == 404


async def test_the_database_holds_the_value_sealed(api: Recorder, tmp_path: Path) -> None:
    await put(api, "billing/api-key")
    files = [path for path in tmp_path.iterdir() if path.name.startswith("cronwheel.db")]
    assert files
    for path in files:
        assert VALUE.encode() not in path.read_bytes(), path.name


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ({"value": ""}, "value: String should have at least 1 character"),
        ({"value": "x" * 16_385}, "value: String should have at most 16384 characters"),
        (
            {"value": "ab\u0000" + VALUE},
            "value: contains a character no store can hold (U+0000, or a lone surrogate U+D800 to U+DFFF)",
        ),
        ({"value": "\u00e9" * 9000}, "a secret's value is at most 16384 bytes (UTF-8), not 18000"),
        ({"value": 42}, "value: Input should be a valid string"),
        ({"value": VALUE, "extra": 1}, "extra: Extra inputs are not permitted"),
    ],
    ids=["empty", "long", "nul", "long-utf8", "not-text", "unknown-field"],
)
async def test_a_refused_value_is_a_422_on_the_field_and_writes_nothing(
    api: Recorder, env: Env, body: dict[str, Any], detail: str
) -> None:
    response = await api.put("/v1/teams/billing/secrets/api-key", json=body)
    assert response.status_code == 422, response.text
    assert response.json()["detail"] == detail
    assert response.json()["errors"][0]["field"] in ("value", "extra")
    assert (await env.store.list_secrets("billing")).items == []


@pytest.mark.parametrize("path", ["/v1/teams/bill ing/secrets/x", "/v1/teams/billing/secrets/a:b"])
async def test_names_outside_the_pattern_are_refused(api: Recorder, path: str) -> None:
    assert (await api.put(path, json={"value": VALUE})).status_code == 422


async def test_the_teams_signing_secret_must_hold_whsec_keys(api: Recorder) -> None:
    refused = await put(api, "billing/webhook-signing", "not-a-whsec")
    assert refused.status_code == 422
    assert "must start with whsec_" in refused.json()["detail"]
    assert "not-a-whsec" not in refused.text
    assert (await put(api, "billing/webhook-signing", new_signing_secret())).status_code == 201
    two = f"{new_signing_secret()} {new_signing_secret()}"  # a rotation
    assert (await put(api, "billing/webhook-signing", two)).status_code == 200


async def test_a_server_without_keys_lists_and_deletes_but_cannot_store(env: Env) -> None:
    transport = httpx.ASGITransport(app=build(env, None), raise_app_exceptions=False)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://cronwheel.test", headers=admin(env)
    ) as api:
        refused = await put(api, "billing/api-key")
        assert refused.status_code == 503
        assert "holds no secret keys" in refused.json()["detail"]
        assert "CRONWHEEL_SECRET_KEYS" in refused.json()["detail"]
        assert (await api.get("/v1/teams/billing/secrets")).json()["items"] == []


# -- who may --------------------------------------------------------------------------------------


async def test_another_teams_secrets_do_not_exist_for_the_caller(api: Recorder, app: FastAPI) -> None:
    await put(api, "billing/api-key")
    as_caller(app, {Scope.READ, Scope.WRITE}, {"payments"})
    for response in [
        await api.get("/v1/teams/billing/secrets/api-key"),
        await api.delete("/v1/teams/billing/secrets/api-key"),
        await put(api, "billing/api-key", "overwritten"),
        await api.get("/v1/teams/billing/secrets"),
    ]:
        assert response.status_code == 404, response.text
    assert (await api.get("/v1/teams/payments/secrets")).status_code == 200


async def test_reading_takes_read_and_writing_takes_write(api: Recorder, app: FastAPI) -> None:
    await put(api, "billing/api-key")
    as_caller(app, {Scope.READ}, {"billing"})
    assert (await api.get("/v1/teams/billing/secrets")).status_code == 200
    assert (await api.get("/v1/teams/billing/secrets/api-key")).status_code == 200
    assert (await put(api, "billing/api-key", "x")).status_code == 403
    assert (await api.delete("/v1/teams/billing/secrets/api-key")).status_code == 403
    as_caller(app, {Scope.WRITE}, {"billing"})
    assert (await api.get("/v1/teams/billing/secrets")).status_code == 403
    assert (await put(api, "billing/api-key", "x")).status_code == 200


# -- re-encryption ----------------------------------------------------------------------------------


async def test_reencrypt_moves_every_value_to_the_newest_key(api: Recorder, env: Env) -> None:
    await put(api, "billing/api-key")
    await put(api, "payments/token")
    rotated = build(env, Keyring([K1, new_key("k2")]))
    transport = httpx.ASGITransport(app=rotated, raise_app_exceptions=False)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://cronwheel.test", headers=admin(env)
    ) as api2:
        done = await api2.post("/v1/secrets/reencrypt")
        assert done.json() == {"key_id": "k2", "rewritten": 2, "changed_meanwhile": 0, "failed": []}
        listed = (await api2.get("/v1/teams/billing/secrets")).json()["items"]
        assert [item["key_id"] for item in listed] == ["k2"]
        again = await api2.post("/v1/secrets/reencrypt")
        assert again.json()["rewritten"] == 0
    # only the new keyring opens them now, and a value whose key is gone is reported, not lost
    lost = build(env, Keyring([new_key("k3")]))
    transport = httpx.ASGITransport(app=lost, raise_app_exceptions=False)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://cronwheel.test", headers=admin(env)
    ) as api3:
        report = (await api3.post("/v1/secrets/reencrypt")).json()
    assert report["rewritten"] == 0
    assert [(f["team"], f["name"]) for f in report["failed"]] == [
        ("billing", "api-key"),
        ("payments", "token"),
    ]
    assert "encrypted with key 'k2', which this process does not have" in report["failed"][0]["error"]
    assert len((await env.store.list_secrets("billing")).items) == 1


async def test_reencrypt_takes_an_admin_of_every_team(api: Recorder, app: FastAPI) -> None:
    as_caller(app, {Scope.WRITE}, None)
    assert (await api.post("/v1/secrets/reencrypt")).status_code == 403
    as_caller(app, {Scope.ADMIN}, {"billing"})
    assert (await api.post("/v1/secrets/reencrypt")).status_code == 403
    as_caller(app, {Scope.ADMIN}, None)
    assert (await api.post("/v1/secrets/reencrypt")).status_code == 200


# -- jobs that refer to secrets -------------------------------------------------------------------


def http_target(**changes: Any) -> dict[str, Any]:
    return {"type": "http", "url": "https://hooks.example.com/nightly", **changes}


async def test_a_job_referring_to_a_missing_secret_is_refused_whole(api: Recorder, env: Env) -> None:
    body = job_body(
        team="billing",
        target=http_target(
            headers={"Authorization": {"secret": "api-key"}, "X-Plain": "p"},
            signing_secret={"secret": "hook-signing"},
        ),
    )
    refused = await api.post("/v1/jobs", json=body)
    assert refused.status_code == 422
    problem = refused.json()
    assert problem["type"] == "urn:cronwheel:problem:secret-not-found"
    assert [(e["field"], e["pointer"], e["code"]) for e in problem["errors"]] == [
        ("target.headers.Authorization", "#/target/headers/Authorization", "secret_not_found"),
        ("target.signing_secret", "#/target/signing_secret", "secret_not_found"),
    ]
    assert problem["detail"].startswith(
        "target.headers.Authorization refers to secret 'api-key', which team 'billing' does not have"
        " (and 1 more)"
    )
    assert (await env.store.list_jobs(JobQuery())).items == []


async def test_a_secret_of_another_team_does_not_count(api: Recorder) -> None:
    await put(api, "payments/api-key")
    body = job_body(team="billing", target=http_target(headers={"Authorization": {"secret": "api-key"}}))
    assert (await api.post("/v1/jobs", json=body)).status_code == 422


async def test_a_job_holds_references_and_reports_its_plain_values(api: Recorder) -> None:
    await put(api, "billing/api-key")
    await put(api, "billing/hook-signing", new_signing_secret())
    target = http_target(
        headers={"Authorization": {"secret": "api-key"}, "X-Plain": "p"},
        signing_secret={"secret": "hook-signing"},
    )
    created = await api.post("/v1/jobs", json=job_body(team="billing", target=target))
    assert created.status_code == 201, created.text
    job = created.json()
    assert job["target"]["headers"] == {"Authorization": {"secret": "api-key"}, "X-Plain": "p"}
    assert job["target"]["signing_secret"] == {"secret": "hook-signing"}
    assert job["plain_values"] == ["target.headers.X-Plain"]
    # PUT and PATCH are checked the same way
    missing = http_target(headers={"Authorization": {"secret": "gone"}})
    put_refused = await api.put(f"/v1/jobs/{job['id']}", json=job_body(team="billing", target=missing))
    assert put_refused.status_code == 422
    patch_refused = await api.patch(f"/v1/jobs/{job['id']}", json={"target": missing})
    assert patch_refused.status_code == 422
    assert patch_refused.json()["errors"][0]["field"] == "target.headers.Authorization"
    assert (await api.get(f"/v1/jobs/{job['id']}")).json()["version"] == 1
    moved = await api.patch(f"/v1/jobs/{job['id']}", json={"team": "payments"})  # the secrets stay behind
    assert moved.status_code == 422


async def test_command_env_references_are_checked_too(api: Recorder, env: Env) -> None:
    env.service.policy = TargetPolicy(allow_commands=True)
    target = {"type": "command", "argv": ["/usr/bin/backup"], "env": {"TOKEN": {"secret": "api-key"}}}
    refused = await api.post("/v1/jobs", json=job_body(team="billing", target=target))
    assert refused.status_code == 422
    assert refused.json()["errors"][0]["field"] == "target.env.TOKEN"
    await put(api, "billing/api-key")
    created = await api.post("/v1/jobs", json=job_body(team="billing", target=target))
    assert created.status_code == 201
    assert created.json()["plain_values"] == []


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        (
            {"A": {"secret": "bad name"}},
            'a reference must be {"secret": NAME}, NAME 1-100 of A-Z a-z 0-9 . _ -',
        ),
        ({"A": {"secrets": "x"}}, 'a reference must be {"secret": NAME}, NAME 1-100 of A-Z a-z 0-9 . _ -'),
        ({"A": 42}, 'must be text of at most 8192 characters without CR, LF or NUL, or {"secret": NAME}'),
    ],
)
async def test_a_malformed_reference_is_one_error_on_its_value(
    api: Recorder, headers: dict[str, Any], message: str
) -> None:
    response = await api.post("/v1/jobs", json=job_body(target=http_target(headers=headers)))
    assert response.status_code == 422
    assert [(e["field"], e["message"]) for e in response.json()["errors"]] == [("target.headers.A", message)]

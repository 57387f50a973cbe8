"""Authentication: a bearer token on every endpoint but the public ones; 401 problems for none,
an invalid, an expired or a revoked one; the last use stamped at most once a minute."""

from __future__ import annotations

import hashlib

import httpx
import pytest

from cronwheel.auth.identity import Scope
from cronwheel.auth.tokens import token_id

from .conftest import START, Env, bearer, issue_token, job_body

PROBLEM = "application/problem+json"


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Basic dXNlcjpwYXNz"},
        {"Authorization": "Bearer"},
        {"Authorization": "Bearer not-a-token"},
        {"Authorization": "Bearer cw_0123456789ab_short"},
        {"Authorization": "Bearer cw_0123456789ab_" + "a" * 43},  # well formed, unknown id
    ],
    ids=["none", "basic", "empty bearer", "other credential", "malformed token", "unknown token"],
)
async def test_requests_without_a_valid_token_are_401_problems(
    anonymous: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    response = await anonymous.get("/v1/jobs", headers=headers)
    assert response.status_code == 401
    assert response.headers["content-type"] == PROBLEM
    assert response.headers["www-authenticate"] == 'Bearer realm="cronwheel"'
    problem = response.json()
    assert problem["type"] == "urn:cronwheel:problem:unauthenticated"
    assert problem["detail"] in (
        "invalid token",
        "this endpoint needs a token: send 'Authorization: Bearer <token>'",
    )


async def test_a_wrong_secret_gets_the_same_answer_as_an_unknown_token(
    env: Env, anonymous: httpx.AsyncClient
) -> None:
    text = await issue_token(env.store, Scope.READ, team="data")
    forged = text[:-1] + ("A" if text[-1] != "A" else "B")
    wrong = await anonymous.get("/v1/jobs", headers=bearer(forged))
    unknown = await anonymous.get("/v1/jobs", headers=bearer("cw_0123456789ab_" + "a" * 43))
    assert wrong.status_code == unknown.status_code == 401
    assert wrong.json() == unknown.json()
    assert (await anonymous.get("/v1/jobs", headers=bearer(text))).status_code == 200


async def test_an_expired_token_is_refused_from_its_expiry_on(env: Env, anonymous: httpx.AsyncClient) -> None:
    from datetime import timedelta

    text = await issue_token(env.store, Scope.READ, team="data", expires_at=START + timedelta(minutes=10))
    env.clock.advance(599)
    assert (await anonymous.get("/v1/jobs", headers=bearer(text))).status_code == 200
    env.clock.advance(1)
    refused = await anonymous.get("/v1/jobs", headers=bearer(text))
    assert refused.status_code == 401
    assert refused.json()["detail"] == f"token {token_id(text)} is expired"


async def test_a_revoked_token_is_refused_at_once(
    env: Env, client: httpx.AsyncClient, anonymous: httpx.AsyncClient
) -> None:
    text = await issue_token(env.store, Scope.READ, team="data")
    assert (await anonymous.get("/v1/jobs", headers=bearer(text))).status_code == 200
    assert (await client.delete(f"/v1/tokens/{token_id(text)}")).status_code == 204
    refused = await anonymous.get("/v1/jobs", headers=bearer(text))
    assert refused.status_code == 401
    assert refused.json()["detail"] == f"token {token_id(text)} is revoked"


async def test_last_use_is_written_at_most_once_a_minute(env: Env, anonymous: httpx.AsyncClient) -> None:
    text = await issue_token(env.store, Scope.READ, team="data")
    tid = token_id(text)
    assert tid is not None
    assert (await env.store.get_token(tid)).last_used_at is None
    await anonymous.get("/v1/jobs", headers=bearer(text))
    assert (await env.store.get_token(tid)).last_used_at == START
    env.clock.advance(59)
    await anonymous.get("/v1/jobs", headers=bearer(text))
    assert (await env.store.get_token(tid)).last_used_at == START  # no write: used a minute ago
    env.clock.advance(1)
    await anonymous.get("/v1/jobs", headers=bearer(text))
    assert (await env.store.get_token(tid)).last_used_at == env.clock.now()


async def test_public_endpoints_need_no_token(anonymous: httpx.AsyncClient) -> None:
    for path in ("/healthz", "/readyz", "/metrics", "/docs", "/openapi.json", "/v1/healthz"):
        assert (await anonymous.get(path)).status_code == 200, path
    for path in ("/v1/jobs", "/v1/runs", "/v1/cluster", "/v1/tokens"):
        assert (await anonymous.get(path)).status_code == 401, path


async def test_the_openapi_document_declares_the_bearer_scheme_on_protected_operations(
    anonymous: httpx.AsyncClient,
) -> None:
    spec = (await anonymous.get("/openapi.json")).json()
    schemes = spec["components"]["securitySchemes"]
    assert schemes == {"HTTPBearer": {"type": "http", "scheme": "bearer", "bearerFormat": "cw_<id>_<secret>",
                                      "description": schemes["HTTPBearer"]["description"]}}  # fmt: skip
    operations = [(path, method, op) for path, item in spec["paths"].items() for method, op in item.items()]
    public = {("/healthz", "get"), ("/readyz", "get"), ("/metrics", "get")}
    for path, method, operation in operations:
        expected: list[dict[str, list[str]]] = [] if (path, method) in public else [{"HTTPBearer": []}]
        assert operation.get("security", []) == expected, (path, method)


async def test_metrics_can_be_reserved_to_a_token_of_every_team(env: Env) -> None:
    from cronwheel.api.app import AccessPolicy, ApiServices, create_app

    app = create_app(
        ApiServices(
            env.store, env.service, env.clock, access=AccessPolicy(("cronwheel.test",), protect_metrics=True)
        )
    )
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://cronwheel.test") as http:
        assert (await http.get("/metrics")).status_code == 401
        team_reader = await issue_token(env.store, Scope.READ, team="data")
        assert (await http.get("/metrics", headers=bearer(team_reader))).status_code == 403
        monitor = await issue_token(env.store, Scope.READ, name="prometheus")
        answer = await http.get("/metrics", headers=bearer(monitor))
        assert answer.status_code == 200
        assert "cronwheel_" in answer.text
        assert (await http.get("/healthz")).status_code == 200


async def test_the_stored_digest_is_the_tokens_sha256(env: Env, client: httpx.AsyncClient) -> None:
    made = (await client.post("/v1/tokens", json={"name": "ci", "team": "data", "scopes": ["read"]})).json()
    stored = await env.store.get_token(made["id"])
    assert stored.digest == hashlib.sha256(made["token"].encode()).hexdigest()
    assert (await client.post("/v1/jobs", json=job_body(), headers=bearer(made["token"]))).status_code == 403

"""OIDC JWTs as bearers of the real API app: the provider's JWK Set served over
HTTP on 127.0.0.1 (an aiohttp server), keys and tokens made in the test, a manual clock. An OIDC
caller is walled to its teams like a token is, gets the scopes its roles map to, and every
refusal is a problem."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from cronwheel.api.app import ApiServices, create_app
from cronwheel.auth.oidc import OidcAuthenticator, OidcSettings
from oidc_auth.provider import AUDIENCE, ISSUER, Provider, SigningKey, claims, forged, rsa_key, sign

from .conftest import BASE_URL, SERVED, Env, bearer, job_body

PROBLEM = "application/problem+json"
KEY, ROTATED = rsa_key("idp-1"), rsa_key("idp-2")
ROLES = ("cronwheel-reader=read", "cronwheel-writer=read,write,trigger", "cronwheel-admin=admin")


class Idp:
    """The provider's JWKS endpoint on 127.0.0.1: the requests it got, and whether it is down."""

    def __init__(self) -> None:
        self.provider = Provider([KEY])
        self.requests = 0
        self.down = False

    async def jwks(self, _: web.Request) -> web.Response:
        self.requests += 1
        if self.down:
            return web.Response(status=503, text="maintenance")
        return web.json_response(self.provider.jwks())


class World:
    def __init__(self, env: Env, idp: Idp, http: httpx.AsyncClient, admin: httpx.AsyncClient) -> None:
        self.env, self.idp, self.http, self.admin = env, idp, http, admin

    def token(self, key: SigningKey = KEY, **changes: Any) -> dict[str, str]:
        return bearer(sign(key, claims(self.env.clock.now(), **changes)))

    async def job(self, name: str, team: str) -> dict[str, Any]:
        response = await self.admin.post("/v1/jobs", json=job_body(name, team))
        assert response.status_code == 201, response.text
        job: dict[str, Any] = response.json()
        return job


@pytest.fixture
async def world(env: Env) -> AsyncIterator[World]:
    idp = Idp()
    app = web.Application()
    app.router.add_get("/jwks", idp.jwks)
    async with TestServer(app, host="127.0.0.1") as server:
        settings = OidcSettings(
            issuer=ISSUER,
            audience=AUDIENCE,
            jwks_url=str(server.make_url("/jwks")),
            team_prefix="cronwheel:",
            roles=ROLES,
        )
        settings.check()
        authenticator = OidcAuthenticator.of(settings, env.clock)
        services = ApiServices(
            env.store, env.service, env.clock, env.readiness, access=SERVED, authenticators=(authenticator,)
        )
        transport = httpx.ASGITransport(app=create_app(services), raise_app_exceptions=False)
        try:
            async with (
                httpx.AsyncClient(transport=transport, base_url=BASE_URL) as http,
                httpx.AsyncClient(
                    transport=transport, base_url=BASE_URL, headers=bearer(env.admin_token)
                ) as admin,
            ):
                yield World(env, idp, http, admin)
        finally:
            await authenticator.close()


async def test_a_reader_sees_its_teams_jobs_only_and_may_not_change_them(world: World) -> None:
    ours, theirs = await world.job("ours", "data"), await world.job("theirs", "billing")
    reader = world.token()  # team data, role cronwheel-reader
    listed = await world.http.get("/v1/jobs", headers=reader)
    assert listed.status_code == 200
    assert [job["id"] for job in listed.json()["items"]] == [ours["id"]]
    assert (await world.http.get(f"/v1/jobs/{ours['id']}", headers=reader)).status_code == 200
    for path in (f"/v1/jobs/{theirs['id']}", "/v1/teams/billing/jobs/theirs"):
        hidden = await world.http.get(path, headers=reader)
        assert hidden.status_code == 404, path
        assert "theirs" not in hidden.text or "theirs" in path
    refused = await world.http.post(f"/v1/jobs/{ours['id']}/trigger", json={}, headers=reader)
    assert refused.status_code == 403
    assert refused.headers["content-type"] == PROBLEM
    assert refused.json()["detail"] == "this oidc lacks the 'trigger' scope"
    created = await world.http.post("/v1/jobs", json=job_body("new", "data"), headers=reader)
    assert created.status_code == 403
    assert world.idp.requests == 1  # every request above used the keys fetched once


async def test_roles_map_to_scopes_on_the_callers_teams(world: World) -> None:
    writer = world.token(roles=["cronwheel-writer"])
    created = await world.http.post("/v1/jobs", json=job_body("new", "data"), headers=writer)
    assert created.status_code == 201, created.text
    run = await world.http.post(f"/v1/jobs/{created.json()['id']}/trigger", json={}, headers=writer)
    assert run.status_code == 201
    elsewhere = await world.http.post("/v1/jobs", json=job_body("new", "billing"), headers=writer)
    assert elsewhere.status_code == 403
    tokens = await world.http.get("/v1/tokens", headers=writer)
    assert tokens.status_code == 403  # admin only

    everyone = world.token(groups=["cronwheel:*"], roles=["cronwheel-admin"])
    made = await world.http.post("/v1/tokens", json={"name": "ci", "team": "billing", "scopes": ["read"]},
                                 headers=everyone)  # fmt: skip
    assert made.status_code == 201, made.text
    assert made.json()["created_by"] is None  # an OIDC subject is no token id
    assert (await world.http.get("/v1/jobs", params={"team": "billing"}, headers=everyone)).status_code == 200


@pytest.mark.parametrize(
    ("token", "detail"),
    [
        ("eyJhbGciOiJSUzI1NiJ9.e30.!!!", "malformed JWT"),
        ("expired", "JWT expired at"),
        ("wrong audience", "JWT audience is not this server"),
        ("alg none", "JWT algorithm 'none' is not accepted"),
        ("hs256", "JWT algorithm 'HS256' is not accepted"),
    ],
)
async def test_a_bad_jwt_is_a_401_problem(world: World, token: str, detail: str) -> None:
    now = world.env.clock.now()
    texts = {
        "expired": sign(KEY, claims(now, exp=int(now.timestamp()) - 60)),
        "wrong audience": sign(KEY, claims(now, aud="another-app")),
        "alg none": forged({"alg": "none", "kid": KEY.kid}, claims(now)),
        "hs256": forged({"alg": "HS256", "kid": KEY.kid}, claims(now), KEY.public_pem()),
    }
    response = await world.http.get("/v1/jobs", headers=bearer(texts.get(token, token)))
    assert response.status_code == 401
    assert response.headers["content-type"] == PROBLEM
    assert response.headers["www-authenticate"] == 'Bearer realm="cronwheel"'
    assert response.json()["type"] == "urn:cronwheel:problem:unauthenticated"
    assert response.json()["detail"].startswith(detail)


async def test_a_verified_jwt_that_grants_nothing_is_a_403_problem(world: World) -> None:
    response = await world.http.get("/v1/jobs", headers=world.token(groups=["staff"]))
    assert response.status_code == 403
    assert response.headers["content-type"] == PROBLEM
    assert "names no cronwheel team" in response.json()["detail"]


async def test_rotated_keys_are_fetched_when_their_kid_arrives_and_kept_while_the_idp_is_down(
    world: World,
) -> None:
    assert (await world.http.get("/v1/jobs", headers=world.token())).status_code == 200
    world.idp.provider.published = [KEY, ROTATED]
    world.env.clock.advance(61)
    assert (await world.http.get("/v1/jobs", headers=world.token(ROTATED))).status_code == 200
    assert world.idp.requests == 2

    for n in range(20):  # made-up key ids cost the provider nothing more within the minute
        made_up = world.token(SigningKey(f"made-up-{n}", "RS256", KEY.private))
        assert (await world.http.get("/v1/jobs", headers=made_up)).status_code == 401
    assert world.idp.requests == 2

    world.idp.down = True
    world.env.clock.advance(3600 + 1)  # the keys are old: fetched again, which fails
    assert (await world.http.get("/v1/jobs", headers=world.token())).status_code == 200
    assert world.idp.requests == 3


async def test_with_the_idp_down_from_the_start_jwts_are_a_503_and_tokens_still_work(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    world.idp.down = True
    response = await world.http.get("/v1/jobs", headers=world.token())
    assert response.status_code == 503
    assert response.headers["content-type"] == PROBLEM
    assert "retry-after" in response.headers  # the provider's outage, as any backend's: no detail
    assert "identity provider's keys could not be read" in caplog.text
    assert (await world.admin.get("/v1/jobs")).status_code == 200


async def test_the_openapi_document_says_a_bearer_may_be_an_oidc_jwt(world: World) -> None:
    document = (await world.http.get("/openapi.json")).json()
    assert "OIDC" in document["components"]["securitySchemes"]["HTTPBearer"]["description"]

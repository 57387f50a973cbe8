"""OIDC with the real server: ``cronwheel server --oidc-*`` fetches the keys of
a provider served on 127.0.0.1, and a JWT of that provider reads its team's jobs over the API and
over the CLI (``CRONWHEEL_TOKEN``), is walled from another team's and held to its role's scopes.
Settings that cannot work stop the server before it touches anything (exit 2)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric import ec
from jwt.algorithms import ECAlgorithm
from server_harness import ServerProcess

pytestmark = pytest.mark.integration

ISSUER, AUDIENCE = "https://login.example.com/", "cronwheel-prod"
KEY = ec.generate_private_key(ec.SECP256R1())
JWKS = {"keys": [{**ECAlgorithm.to_jwk(KEY.public_key(), as_dict=True), "kid": "k1", "alg": "ES256"}]}


def _token(groups: list[str], roles: list[str]) -> str:
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "auth0|alice", "email": "alice@example.com",
              "iat": now, "exp": now + 600, "groups": groups, "roles": roles}  # fmt: skip
    return jwt.encode(claims, KEY, algorithm="ES256", headers={"kid": "k1"})


@pytest.fixture
async def jwks_url() -> AsyncIterator[tuple[str, list[str]]]:
    """The provider's JWK Set on 127.0.0.1, and the paths of the requests it answered."""
    seen: list[str] = []

    async def answer(request: web.Request) -> web.Response:
        seen.append(request.path)
        return web.json_response(JWKS)

    app = web.Application()
    app.router.add_get("/.well-known/jwks.json", answer)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}/.well-known/jwks.json", seen
    await runner.cleanup()


def _oidc(url: str) -> tuple[str, ...]:
    return ("--oidc-issuer", ISSUER, "--oidc-audience", AUDIENCE, "--oidc-jwks-url", url,
            "--oidc-team-prefix", "cronwheel:", "--oidc-role", "reader=read",
            "--oidc-role", "deployer=read,write,trigger")  # fmt: skip


async def _job(api: httpx.AsyncClient, team: str) -> dict[str, Any]:
    body = {"team": team, "name": f"{team}-nightly", "schedule": "0 3 * * *",
            "target": {"type": "http", "url": "http://127.0.0.1:9/hook"}}  # fmt: skip
    response = await api.post("/v1/jobs", json=body)
    assert response.status_code == 201, response.text
    job: dict[str, Any] = response.json()
    return job


async def test_a_providers_jwt_reads_its_teams_jobs_from_the_real_server(
    server_factory: Callable[..., ServerProcess], jwks_url: tuple[str, list[str]], tmp_path: Path
) -> None:
    url, seen = jwks_url
    server = server_factory(*_oidc(url))
    assert f"OIDC: tokens of {ISSUER} for {AUDIENCE}, keys from {url}" in server.log.read_text()
    async with server.client() as admin:
        ours, theirs = await _job(admin, "data"), await _job(admin, "billing")
    reader = {"Authorization": f"Bearer {_token(['cronwheel:data'], ['reader'])}"}
    async with httpx.AsyncClient(base_url=server.url, headers=reader, timeout=10) as http:
        listed = await http.get("/v1/jobs")
        assert listed.status_code == 200, listed.text
        assert [job["name"] for job in listed.json()["items"]] == ["data-nightly"]
        assert (await http.get(f"/v1/jobs/{theirs['id']}")).status_code == 404
        refused = await http.post(f"/v1/jobs/{ours['id']}/trigger", json={})
        assert refused.status_code == 403
        assert refused.headers["content-type"] == "application/problem+json"
    deployer = {"Authorization": f"Bearer {_token(['cronwheel:data'], ['deployer'])}"}
    async with httpx.AsyncClient(base_url=server.url, headers=deployer, timeout=10) as http:
        assert (await http.post(f"/v1/jobs/{ours['id']}/trigger", json={})).status_code == 201
    assert seen == ["/.well-known/jwks.json"]  # fetched once, on the first JWT

    env = {key: value for key, value in os.environ.items() if not key.startswith("CRONWHEEL_")}
    env |= {"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
            "XDG_STATE_HOME": str(tmp_path / "state"), "CRONWHEEL_URL": server.url,
            "CRONWHEEL_TOKEN": _token(["cronwheel:data"], ["reader"])}  # fmt: skip
    cli = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cronwheel", "jobs", "list", "-o", "json", env=env, cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(cli.communicate(), 30)
    assert cli.returncode == 0, err.decode()
    assert [job["name"] for job in json.loads(out)["items"]] == ["data-nightly"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--oidc-issuer", ISSUER), "--oidc-issuer needs --oidc-audience"),
        (("--oidc-audience", AUDIENCE), "the --oidc-* options need --oidc-issuer"),
        (
            (
                "--oidc-issuer",
                ISSUER,
                "--oidc-audience",
                AUDIENCE,
                "--oidc-jwks-url",
                "http://idp.example.com/k",
                "--oidc-role",
                "r=read",
            ),
            "--oidc-jwks-url must be https://",
        ),
        (
            (
                "--oidc-issuer",
                ISSUER,
                "--oidc-audience",
                AUDIENCE,
                "--oidc-jwks-file",
                "/nonexistent",
                "--oidc-role",
                "r=read",
            ),
            "--oidc-jwks-file: cannot read /nonexistent",
        ),
        (
            (
                "--oidc-issuer",
                ISSUER,
                "--oidc-audience",
                AUDIENCE,
                "--oidc-jwks-url",
                "https://idp.example.com/k",
            ),
            "at least one --oidc-role",
        ),
    ],
    ids=["no audience", "no issuer", "plain http", "unreadable file", "no role"],
)
async def test_oidc_settings_that_cannot_work_stop_the_server_with_exit_2(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    database = tmp_path / "cronwheel.db"
    env = {key: value for key, value in os.environ.items() if not key.startswith("CRONWHEEL_")}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cronwheel", "server", "--port", "0", "--database-url", f"sqlite:///{database}",
        *args, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 2
    assert message in err.decode()
    assert list(tmp_path.iterdir()) == []  # nothing written: no database, no token, no keys

"""The authorization matrix: every route of the app x every kind of caller, with the status each
must get (guarantee 8: teams are walls).

The routes are read from the app itself (:func:`app_routes`), and
:func:`test_every_route_of_the_app_is_in_the_matrix` fails when one has no row in :data:`ROWS`:
a new route cannot escape the matrix. Each case runs on a fresh job of team ``data`` (with a run,
and a token of the team to read or revoke), so that no case depends on another's writes; every
answer to a caller who may not see team ``data`` is also checked not to hold that job's id, name
or run id (unless the request itself named it).

Callers with a JWT of an identity provider (:data:`OIDC_PERSONAS`, cronwheel.auth.oidc; a JWK Set file
made here) run every row too, each held to the status of the token persona it matches: an OIDC
caller is walled and scoped exactly as a token is.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute, iter_route_contexts
from starlette.routing import Mount, Route

from cronwheel.api.app import ApiServices, create_app
from cronwheel.auth.identity import Scope
from cronwheel.auth.oidc import OidcAuthenticator, OidcSettings
from cronwheel.auth.tokens import issue
from cronwheel.clock import SystemClock
from cronwheel.cluster.mode import Mode
from cronwheel.cluster.status import ClusterStatus
from cronwheel.coordinator.local import LocalCoordinator
from cronwheel.model import Calendar, CalendarSpec
from cronwheel.secrets.crypto import Keyring, new_key
from cronwheel.secrets.service import SecretService
from oidc_auth.provider import AUDIENCE, ISSUER, Provider, claims, rsa_key, sign

from .conftest import BASE_URL, SERVED, START, Env, bearer, job_body

READ, WRITE, TRIGGER, ADMIN = Scope.READ, Scope.WRITE, Scope.TRIGGER, Scope.ADMIN
PERSONAS = ("none", "wrong team", "read", "write", "trigger", "team admin", "admin", "expired", "revoked")
UNAUTHENTICATED = {"none": 401, "expired": 401, "revoked": 401}
SEES_DATA = {"read", "write", "trigger", "team admin", "admin"}  # which personas see team data
OIDC_PERSONAS = {  # callers with an identity provider's JWT, and the token persona each must match
    "oidc wrong team": "wrong team",
    "oidc read": "read",
    "oidc writer": "write",
    "oidc admin": "admin",
    "oidc expired": "expired",
}
OIDC_ROLES = ("reader=read", "writer=write", "admin=admin", "owner=read,write,trigger,admin")


def team_object(scope: Scope, ok: int) -> dict[str, int]:
    """A route on one object of team ``data`` that needs ``scope``: another team's caller finds
    nothing (404), a caller of the team without the scope is refused (403)."""
    granted = {"read": READ, "write": WRITE, "trigger": TRIGGER}
    return {
        **UNAUTHENTICATED,
        "wrong team": 404,
        **{name: ok if scope is held else 403 for name, held in granted.items()},
        "team admin": ok,
        "admin": ok,
    }


def team_free(scope: Scope, ok: int, *, wrong_team: int | None = None) -> dict[str, int]:
    """A route on no one object (a listing, a preview): the wrong team's caller (every scope, on
    its own team) gets ``ok`` too, unless ``wrong_team`` says otherwise."""
    expected = team_object(scope, ok)
    expected["wrong team"] = ok if wrong_team is None else wrong_team
    return expected


def every_team_admin(ok: int) -> dict[str, int]:
    return {**dict.fromkeys(PERSONAS, 403), **UNAUTHENTICATED, "admin": ok}


def token_admin(ok: int, *, wrong_team: int) -> dict[str, int]:
    """Token routes: admins only; a team admin manages its own team's tokens."""
    return {**team_object(ADMIN, ok), "wrong team": wrong_team}


PUBLIC = dict.fromkeys(PERSONAS, 200)
KEYRING = Keyring([new_key("k1")])
OIDC_KEY = rsa_key("matrix")  # seals the secrets of the worlds and of the app alike


@dataclass(frozen=True)
class Row:
    expected: Mapping[str, int]
    body: Callable[[World], Any] | None = None
    path: str | None = None  # a concrete path, for routes whose template has none of our parameters
    query: str = ""  # a query string, filled like the path


@dataclass
class World:
    """What one case acts on: a fresh job of team ``data``, a run of it, a token of the team."""

    job_id: str
    name: str
    run_id: str
    token_id: str
    backfill_id: str
    tokens: dict[str, str] = field(default_factory=dict)

    def fill(self, template: str) -> str:
        return template.format(
            job_id=self.job_id,
            team="data",
            name=self.name,
            run_id=self.run_id,
            token_id=self.token_id,
            backfill_id=self.backfill_id,
        )


JOB, BY_NAME = "/v1/jobs/{job_id}", "/v1/teams/{team}/jobs/{name}"
PAST_RANGE = {"from": "2026-02-20T00:00:00Z", "to": "2026-03-01T00:00:00Z"}  # nine slots of job_body's
ROWS: dict[tuple[str, str], Row] = {
    ("POST", "/v1/jobs"): Row(
        team_free(WRITE, 201, wrong_team=403), lambda w: job_body(f"{w.name}-new", "data")
    ),
    ("POST", "/v1/jobs:validate"): Row(
        team_free(WRITE, 200, wrong_team=403), lambda w: job_body(f"{w.name}-new", "data")
    ),
    ("GET", "/v1/jobs"): Row(team_free(READ, 200)),
    ("GET", "/v1/runs"): Row(team_free(READ, 200)),
    ("GET", "/v1/runs/{run_id}"): Row(team_object(READ, 200)),
    ("GET", "/v1/runs/{run_id}/output"): Row(team_object(READ, 200)),
    ("POST", "/v1/schedules/preview"): Row(team_free(READ, 200), lambda w: {"expression": "0 3 * * *"}),
    ("GET", "/v1/schedules/upcoming"): Row(team_free(READ, 200)),
    ("GET", "/v1/cluster"): Row(every_team_admin(200)),
    # a stream of the world's job ends at once here (the hub's lifetime_s is 0: matrix_env)
    ("GET", "/v1/events"): Row(team_object(READ, 200), query="?topics=job:{job_id}"),
    ("POST", "/v1/tokens"): Row(
        token_admin(201, wrong_team=403), lambda w: {"name": "ci", "team": "data", "scopes": ["read"]}
    ),
    ("GET", "/v1/tokens"): Row(token_admin(200, wrong_team=200)),
    ("GET", "/v1/tokens/{token_id}"): Row(token_admin(200, wrong_team=404)),
    ("DELETE", "/v1/tokens/{token_id}"): Row(token_admin(204, wrong_team=404)),
    # each world's job name is also the name of a secret of team data
    ("GET", "/v1/teams/{team}/secrets"): Row(team_object(READ, 200)),
    ("GET", "/v1/teams/{team}/secrets/{name}"): Row(team_object(READ, 200)),
    ("PUT", "/v1/teams/{team}/secrets/{name}"): Row(team_object(WRITE, 200), lambda w: {"value": "v2"}),
    ("DELETE", "/v1/teams/{team}/secrets/{name}"): Row(team_object(WRITE, 204)),
    ("POST", "/v1/secrets/reencrypt"): Row(every_team_admin(200)),
    # and the name of a calendar of team data
    ("GET", "/v1/teams/{team}/calendars"): Row(team_object(READ, 200)),
    ("GET", "/v1/teams/{team}/calendars/{name}"): Row(team_object(READ, 200)),
    ("POST", "/v1/teams/{team}/calendars"): Row(
        team_object(WRITE, 201), lambda w: {"name": f"{w.name}-new", "weekdays": ["sun"]}
    ),
    ("PUT", "/v1/teams/{team}/calendars/{name}"): Row(
        team_object(WRITE, 200), lambda w: {"weekdays": ["sat"]}
    ),
    ("DELETE", "/v1/teams/{team}/calendars/{name}"): Row(team_object(WRITE, 204)),
    ("GET", "/v1/teams/{team}/notifications"): Row(team_object(READ, 200)),
    ("PUT", "/v1/teams/{team}/notifications"): Row(team_object(WRITE, 200), lambda w: {"rules": []}),
    ("POST", "/v1/teams/{team}/notifications/test"): Row(team_object(WRITE, 202), lambda w: {}),
    # admins read their teams' entries (the wrong team's: an empty page of team data's)
    ("GET", "/v1/audit"): Row(token_admin(200, wrong_team=200), path="/v1/audit?team=data"),
    **{
        (method, "/v1" + prefix + path): row
        for prefix in ("/healthz", "/readyz", "/metrics")
        for method, path, row in [("GET", "", Row(PUBLIC))]
    },
    ("GET", "/healthz"): Row(PUBLIC),
    ("GET", "/readyz"): Row(PUBLIC),
    ("GET", "/metrics"): Row(PUBLIC),
    ("GET", "/openapi.json"): Row(PUBLIC),
    ("GET", "/docs"): Row(PUBLIC),
    ("GET", "/docs/assets"): Row(PUBLIC, path="/docs/assets/swagger-ui.css"),
    # the dashboard (cronwheel.api.routes.ui): its page and assets are public like /docs; a bearer opens a
    # session (201) as it would call the API; nothing else of it takes a bearer: a session's cookie
    # and CSRF token, which no caller here has, are what /ui/session and the bridge /ui/api read
    ("GET", "/ui"): Row(dict.fromkeys(PERSONAS, 307)),
    ("GET", "/ui/"): Row(PUBLIC),
    ("GET", "/ui/assets"): Row(PUBLIC, path="/ui/assets/app.js"),
    ("POST", "/ui/session"): Row({**dict.fromkeys(PERSONAS, 201), **UNAUTHENTICATED}),
    ("GET", "/ui/session"): Row(dict.fromkeys(PERSONAS, 401)),
    ("DELETE", "/ui/session"): Row(dict.fromkeys(PERSONAS, 401)),
    ("GET", "/ui/api"): Row(dict.fromkeys(PERSONAS, 401), path="/ui/api/v1/jobs"),
    **{
        (method, base + suffix): row
        for base in (JOB, BY_NAME)
        for method, suffix, row in [
            ("GET", "", Row(team_object(READ, 200))),
            ("PUT", "", Row(team_object(WRITE, 200), lambda w: job_body(w.name, "data", description="v2"))),
            ("PATCH", "", Row(team_object(WRITE, 200), lambda w: {"description": "v2"})),
            ("DELETE", "", Row(team_object(WRITE, 204))),
            (
                "POST",
                "/validate",
                Row(team_object(WRITE, 200), lambda w: job_body(w.name, "data", description="v2")),
            ),
            ("POST", "/pause", Row(team_object(WRITE, 200), lambda w: {"note": "n"})),
            ("POST", "/resume", Row(team_object(WRITE, 200), lambda w: {})),
            ("POST", "/trigger", Row(team_object(TRIGGER, 201), lambda w: {})),
            ("POST", "/backfills", Row(team_object(TRIGGER, 202), lambda w: PAST_RANGE)),
            ("GET", "/backfills", Row(team_object(READ, 200))),
            ("GET", "/backfills/{backfill_id}", Row(team_object(READ, 200))),
            ("POST", "/backfills/{backfill_id}/cancel", Row(team_object(TRIGGER, 200))),
            ("GET", "/runs", Row(team_object(READ, 200))),
            ("GET", "/notifications", Row(team_object(READ, 200))),
            ("PUT", "/notifications", Row(team_object(WRITE, 200), lambda w: {"rules": []})),
            ("DELETE", "/notifications", Row(team_object(WRITE, 204))),
        ]
    },
}


def app_routes(app: FastAPI) -> set[tuple[str, str]]:
    """Every (method, path) the app answers (HEAD aside: it is GET's), mounts included."""
    found: set[tuple[str, str]] = set()
    for context in iter_route_contexts(app.routes):  # included routers flattened, prefixes applied
        route, path = context.original_route, context.path
        assert path is not None, route
        if isinstance(route, (APIRoute, Route)):
            found.update((method, path) for method in context.methods or () if method != "HEAD")
        elif isinstance(route, Mount):
            found.add(("GET", path))
        else:
            raise AssertionError(f"a route of a kind the matrix does not know: {route!r}")
    return found


def _bare_app() -> FastAPI:
    """The app as served, for its list of routes (no backend is touched to build it)."""
    return create_app(cast(ApiServices, SimpleNamespace(access=SERVED, clock=SystemClock())))


def test_every_route_of_the_app_is_in_the_matrix() -> None:
    routes = app_routes(_bare_app())
    assert routes - ROWS.keys() == set(), "routes without a row in the authorization matrix"
    assert ROWS.keys() - routes == set(), "rows of routes the app no longer has"
    for key, row in ROWS.items():
        assert set(row.expected) == set(PERSONAS), key


async def _tokens(env: Env) -> dict[str, str]:
    """One token per persona (none: no token at all)."""
    specs: dict[str, tuple[str | None, tuple[Scope, ...]]] = {
        "wrong team": ("other", (READ, WRITE, TRIGGER, ADMIN)),
        "read": ("data", (READ,)),
        "write": ("data", (WRITE,)),
        "trigger": ("data", (TRIGGER,)),
        "team admin": ("data", (ADMIN,)),
        "admin": (None, (ADMIN,)),
        "expired": ("data", (ADMIN,)),
        "revoked": ("data", (ADMIN,)),
    }
    texts = {}
    for persona, (team, scopes) in specs.items():
        expires = START + timedelta(seconds=1) if persona == "expired" else None
        record, text = issue(persona, team, scopes, START, expires_at=expires)
        await env.store.create_token(record)
        if persona == "revoked":
            await env.store.revoke_token(record.id, START)
        texts[persona] = text
    env.clock.advance(60)  # the expired one is now
    return texts


def _oidc_tokens(now: datetime) -> dict[str, str]:
    """One JWT of the provider per OIDC persona (see :data:`OIDC_PERSONAS`)."""
    specs = {
        "oidc wrong team": (["cw:other"], ["owner"], 300),
        "oidc read": (["cw:data"], ["reader"], 300),
        "oidc writer": (["cw:data", "staff"], ["writer"], 300),
        "oidc admin": (["cw:*"], ["admin"], 300),
        "oidc expired": (["cw:data"], ["owner"], -60),
    }
    return {
        persona: sign(OIDC_KEY, claims(now, groups=groups, roles=roles, exp=int(now.timestamp()) + lasts))
        for persona, (groups, roles, lasts) in specs.items()
    }


@pytest.fixture
async def matrix_env(
    env: Env, tmp_path: Path
) -> AsyncIterator[tuple[Env, dict[str, str], httpx.AsyncClient]]:
    status = ClusterStatus(
        env.store,
        env.queue,
        LocalCoordinator("n1", ("api",), env.clock),
        ("default",),
        Mode("sqlite", "local", "memory"),
    )
    secrets = SecretService(env.store, KEYRING, env.clock)
    jwks = Provider([OIDC_KEY]).write(tmp_path / "jwks.json")
    oidc = OidcSettings(ISSUER, AUDIENCE, jwks_file=str(jwks), team_prefix="cw:", roles=OIDC_ROLES)
    oidc.check()
    services = ApiServices(
        env.store, env.service, env.clock, env.readiness, cluster=status, access=SERVED, secrets=secrets,
        authenticators=(OidcAuthenticator.of(oidc, env.clock),),
    )  # fmt: skip
    services.events.lifetime_s = 0.0  # a stream answers its head and ends (httpx over ASGI waits)
    app = create_app(services)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as http:
        tokens = await _tokens(env)
        yield env, {**tokens, **_oidc_tokens(env.clock.now())}, http


_counter = itertools.count()


async def _world(env: Env) -> World:
    name = f"job-{next(_counter)}"
    job = await env.service.create(_record(name))
    run, _ = await env.service.trigger(job.id)
    record, _ = issue(f"tok-{name}", "data", [READ], env.clock.now())
    await env.store.create_token(record)
    await SecretService(env.store, KEYRING, env.clock).set("data", name, "s3cr3t-value")
    await env.store.create_calendar(Calendar("data", name, CalendarSpec(weekdays=(7,))))
    start, end = (datetime.fromisoformat(PAST_RANGE[key]) for key in ("from", "to"))
    backfill = await env.service.backfill(job.id, start, end)
    return World(job.id, name, run.id, record.id, backfill.id)


def _record(name: str) -> Any:
    from cronwheel.api.schemas.jobs import JobCreate

    return JobCreate.model_validate(job_body(name, "data")).to_record()


@pytest.mark.parametrize(("method", "template"), sorted(ROWS), ids=[f"{m} {p}" for m, p in sorted(ROWS)])
async def test_each_caller_gets_its_status(
    matrix_env: tuple[Env, dict[str, str], httpx.AsyncClient], method: str, template: str
) -> None:
    env, tokens, http = matrix_env
    row = ROWS[(method, template)]
    failures = []
    for persona in (*PERSONAS, *OIDC_PERSONAS):
        world = await _world(env)
        headers = {} if persona == "none" else bearer(tokens[persona])
        body = None if row.body is None else row.body(world)
        path = (row.path or world.fill(template)) + world.fill(row.query)
        response = await http.request(method, path, json=body, headers=headers)
        expected = row.expected[OIDC_PERSONAS.get(persona, persona)]
        if response.status_code != expected:
            failures.append(f"{persona}: {response.status_code} (expected {expected}) {response.text[:200]}")
        if OIDC_PERSONAS.get(persona, persona) not in SEES_DATA:  # nothing of team data but what it sent
            shown = [
                v for v in (world.job_id, world.name, world.run_id) if v in response.text and v not in path
            ]
            if shown:
                failures.append(f"{persona}: the answer shows team data's {shown}")
    assert not failures, "\n".join(failures)

"""The dashboard's session (cronwheel.api.routes.ui): login with a bearer, the cookie's attributes, CSRF on
every bridged request, the guard's cross-site refusals, team walls through the bridge, and the ends
of a session (logout, idle, revocation). The browser itself is in tests/ui."""

from __future__ import annotations

import hashlib
import posixpath
import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from cronwheel.api.guards import host as guard
from cronwheel.api.routes import ui
from cronwheel.audit import AuditQuery
from cronwheel.auth import tokens
from cronwheel.auth.identity import Scope
from cronwheel.clock import ManualClock
from cronwheel.store import JobQuery

from .conftest import SERVED, START, TYPES, Env, bearer, issue_token, job_body

CSRF = "X-Cronwheel-CSRF"
DASHBOARD_FILES = sorted(
    path.relative_to(ui.ASSETS).as_posix() for path in ui.ASSETS.rglob("*") if path.suffix in {".js", ".css"}
)


async def _login(http: httpx.AsyncClient, token: str) -> str:
    """Log ``http`` in (its cookie jar keeps the session); returns the CSRF token."""
    response = await http.post("/ui/session", headers=bearer(token))
    assert response.status_code == 201, response.text
    csrf = response.json()["csrf"]
    assert isinstance(csrf, str)
    return csrf


@pytest.fixture
async def browser(env: Env) -> AsyncIterator[httpx.AsyncClient]:
    """A client without a token: only its cookies speak for it, as in a browser."""
    async with env.client() as http:
        yield http


async def test_the_page_is_public_and_locked_down(browser: httpx.AsyncClient) -> None:
    assert (await browser.get("/ui")).headers["location"] == "ui/"
    page = await browser.get("/ui/")
    assert page.status_code == 200
    assert '<script type="module" src="assets/app.js">' in page.text
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy
    assert "frame-ancestors 'none'" in policy
    assert page.headers["x-frame-options"] == "DENY"
    assert {"app.js", "api.js", "style.css", "pages/job.js"} <= set(DASHBOARD_FILES)


async def test_the_page_preloads_the_modules_the_app_needs_and_not_the_form(
    browser: httpx.AsyncClient,
) -> None:
    """Every module app.js imports, directly or not, is named for preloading before app.js; the job
    form's modules load when the form opens (a dynamic import), so no page but the form fetches them."""
    page = (await browser.get("/ui/")).text
    preloaded = re.findall(r'<link rel="modulepreload" href="assets/([^"]+)">', page)
    assert preloaded == ui.preloaded_modules()
    assert {"api.js", "dom.js", "live.js", "pages/jobs.js", "pages/job.js", "pager.js"} <= set(preloaded)
    assert not {"pages/editor.js", "forms/widgets.js", "vendor/js-yaml.js"} & set(preloaded)
    assert page.index("modulepreload") < page.index('src="assets/app.js"')


@pytest.mark.parametrize("name", DASHBOARD_FILES)
async def test_every_dashboard_file_is_served_with_its_type(browser: httpx.AsyncClient, name: str) -> None:
    """Each file of static/ui, the modules of its pages/ included, under /ui/assets: a module script
    loads only with a JavaScript type (the app says nosniff)."""
    asset = await browser.get(f"/ui/assets/{name}")
    assert asset.status_code == 200
    assert asset.content == (ui.ASSETS / name).read_bytes()
    assert asset.headers["content-type"].split(";")[0] in TYPES[Path(name).suffix]


def test_the_vendored_yaml_module_has_its_licence_origin_and_checksums() -> None:
    """js-yaml, the dashboard's one third-party file: pinned, from npm, unchanged (the sha256 noted)."""
    folder = ui.ASSETS / "vendor"
    note = (folder / "VENDOR.md").read_text()
    assert "https://registry.npmjs.org/js-yaml/-/js-yaml-5.5.0.tgz" in note
    assert (folder / "js-yaml.LICENSE").read_text().startswith("(The MIT License)")
    for name in ("js-yaml.js", "js-yaml.LICENSE"):
        assert f"`{name}` {hashlib.sha256((folder / name).read_bytes()).hexdigest()}" in note


def test_every_module_the_dashboard_imports_is_one_of_its_files() -> None:
    """The modules import one another by relative URL (statically or with ``import()``): each names
    a file of static/ui (so it is served)."""
    imports = {
        (name, target)
        for name in DASHBOARD_FILES
        for pattern in (r'^import .* from "([^"]+)";$', r'import\("([^"]+)"\)')
        for target in re.findall(pattern, (ui.ASSETS / name).read_text(), re.M)
    }
    assert {("app.js", "./pages/job.js"), ("app.js", "./pages/editor.js")} <= imports
    for name, target in imports:
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(name), target))
        assert resolved in DASHBOARD_FILES, (name, target)


async def test_login_sets_a_strict_http_only_cookie_and_never_the_token(
    env: Env, browser: httpx.AsyncClient
) -> None:
    response = await browser.post("/ui/session", headers=bearer(env.admin_token))
    assert response.status_code == 201
    cookie = response.headers["set-cookie"]
    assert "HttpOnly" in cookie
    assert "SameSite=strict" in cookie
    assert "Path=/ui" in cookie
    assert "Secure" not in cookie  # plain http here; https below
    assert env.admin_token not in cookie
    assert env.admin_token not in response.text
    assert response.json()["caller"] == {
        "kind": "token",
        "name": "test-admin",
        "teams": None,
        "scopes": ["admin"],
    }


async def test_the_cookie_is_secure_over_https(env: Env) -> None:
    transport = httpx.ASGITransport(app=env.app)
    async with httpx.AsyncClient(transport=transport, base_url="https://cronwheel.test") as http:
        response = await http.post("/ui/session", headers=bearer(env.admin_token))
    assert "Secure" in response.headers["set-cookie"]


@pytest.mark.parametrize("credential", ["cw_nope_nope", "garbage", ""])
async def test_a_wrong_token_opens_no_session(env: Env, browser: httpx.AsyncClient, credential: str) -> None:
    response = await browser.post("/ui/session", headers={"Authorization": f"Bearer {credential}"})
    assert response.status_code == 401
    assert response.headers["content-type"] == "application/problem+json"
    assert "set-cookie" not in response.headers or 'cronwheel_session=""' in response.headers["set-cookie"]
    assert len(env.app.state.ui_sessions) == 0
    assert (await browser.get("/ui/session")).status_code == 401


async def test_a_login_without_authorization_is_refused_by_the_guard(browser: httpx.AsyncClient) -> None:
    # a form post from any page: no Authorization, no CSRF header
    response = await browser.post("/ui/session", content=b"token=x", headers={"Content-Type": "text/plain"})
    assert response.status_code == 401


async def test_the_session_reads_and_acts_through_the_api(env: Env, browser: httpx.AsyncClient) -> None:
    csrf = await _login(browser, env.admin_token)
    assert (await browser.get("/ui/session")).json()["csrf"] == csrf
    created = await browser.post("/ui/api/v1/jobs", json=job_body("nightly"), headers={CSRF: csrf})
    assert created.status_code == 201, created.text
    job_id = created.json()["id"]
    paused = await browser.post(
        f"/ui/api/v1/jobs/{job_id}/pause", json={"note": "maint"}, headers={CSRF: csrf}
    )
    assert paused.json()["pause_note"] == "maint"
    listed = await browser.get("/ui/api/v1/jobs?paused=true", headers={CSRF: csrf})
    assert [job["id"] for job in listed.json()["items"]] == [job_id]
    entries = await env.store.list_audit(AuditQuery())
    assert {entry.actor_name for entry in entries.items} == {"test-admin"}  # the token's own name


@pytest.mark.parametrize("method", ["GET", "POST"])
async def test_every_bridged_request_needs_the_csrf_token(
    env: Env, browser: httpx.AsyncClient, method: str
) -> None:
    await _login(browser, env.admin_token)
    body = job_body("nope") if method == "POST" else None
    for headers in ({}, {CSRF: "wrong"}):
        response = await browser.request(method, "/ui/api/v1/jobs", json=body, headers=headers)
        assert response.status_code in (401, 403), response.text  # the guard (POST without it) or the bridge
    assert (await env.store.list_jobs(JobQuery())).items == []


async def test_cross_site_and_form_requests_are_refused_even_with_the_csrf_token(
    env: Env, browser: httpx.AsyncClient
) -> None:
    csrf = await _login(browser, env.admin_token)
    cross = await browser.post(
        "/ui/api/v1/jobs", json=job_body("x"), headers={CSRF: csrf, "Sec-Fetch-Site": "cross-site"}
    )
    assert cross.status_code == 403
    origin = await browser.post(
        "/ui/api/v1/jobs", json=job_body("x"), headers={CSRF: csrf, "Origin": "https://evil.example"}
    )
    assert origin.status_code == 403
    form = await browser.post(
        "/ui/api/v1/jobs",
        content=b"a=b",
        headers={CSRF: csrf, "Content-Type": "application/x-www-form-urlencoded"},
    )
    assert form.status_code == 415
    assert (await env.store.list_jobs(JobQuery())).items == []


async def test_the_cookie_is_no_credential_for_v1(env: Env, browser: httpx.AsyncClient) -> None:
    csrf = await _login(browser, env.admin_token)
    cookie = browser.cookies.get(ui.COOKIE)
    assert cookie
    for path in ("/v1/jobs",):
        response = await browser.get(path, headers={CSRF: csrf, "Cookie": f"{ui.COOKIE}={cookie}"})
        assert response.status_code == 401


@pytest.mark.parametrize(
    "path", ["/ui/api/v1/../docs", "/ui/api/healthz", "/ui/api/openapi.json", "/ui/api/v1"]
)
async def test_the_bridge_reaches_v1_only(env: Env, browser: httpx.AsyncClient, path: str) -> None:
    csrf = await _login(browser, env.admin_token)
    assert (await browser.get(path, headers={CSRF: csrf})).status_code == 404


async def test_team_walls_hold_through_the_session(env: Env, browser: httpx.AsyncClient) -> None:
    async with env.client(env.admin_token) as admin:
        theirs = (await admin.post("/v1/jobs", json=job_body("theirs", "ops"))).json()["id"]
        ours = (await admin.post("/v1/jobs", json=job_body("ours", "data"))).json()["id"]
    reader = await issue_token(env.store, Scope.READ, team="data", name="data-reader")
    csrf = await _login(browser, reader)
    listed = await browser.get("/ui/api/v1/jobs", headers={CSRF: csrf})
    assert [job["id"] for job in listed.json()["items"]] == [ours]
    assert (await browser.get(f"/ui/api/v1/jobs/{theirs}", headers={CSRF: csrf})).status_code == 404
    refused = await browser.post(f"/ui/api/v1/jobs/{ours}/pause", json={}, headers={CSRF: csrf})
    assert refused.status_code == 403  # a read token may not pause
    assert (
        await browser.post(f"/ui/api/v1/jobs/{theirs}/pause", json={}, headers={CSRF: csrf})
    ).status_code == 404


async def test_logout_needs_the_csrf_token_and_ends_the_session(env: Env, browser: httpx.AsyncClient) -> None:
    csrf = await _login(browser, env.admin_token)
    cookie = browser.cookies.get(ui.COOKIE)
    assert (await browser.delete("/ui/session", headers={CSRF: "wrong"})).status_code == 403
    assert (await browser.delete("/ui/session")).status_code == 401  # the guard: no header at all
    assert (await browser.delete("/ui/session", headers={CSRF: csrf})).status_code == 204
    stale = await browser.get("/ui/api/v1/jobs", headers={CSRF: csrf, "Cookie": f"{ui.COOKIE}={cookie}"})
    assert stale.status_code == 401


async def test_a_new_login_gets_a_new_session_id(env: Env, browser: httpx.AsyncClient) -> None:
    await _login(browser, env.admin_token)
    first = browser.cookies.get(ui.COOKIE)
    await _login(browser, env.admin_token)
    assert browser.cookies.get(ui.COOKIE) != first
    assert len(env.app.state.ui_sessions) == 1  # the old one was closed


async def test_an_idle_session_ends(env: Env, browser: httpx.AsyncClient) -> None:
    csrf = await _login(browser, env.admin_token)
    env.clock.advance(ui.IDLE.total_seconds() - 1)
    assert (await browser.get("/ui/api/v1/jobs", headers={CSRF: csrf})).status_code == 200
    env.clock.advance(ui.IDLE.total_seconds() + 1)
    assert (await browser.get("/ui/api/v1/jobs", headers={CSRF: csrf})).status_code == 401


async def test_a_revoked_token_ends_its_sessions_at_once(env: Env, browser: httpx.AsyncClient) -> None:
    writer = await issue_token(env.store, Scope.WRITE, Scope.READ, team="data", name="w")
    csrf = await _login(browser, writer)
    assert (await browser.get("/ui/api/v1/jobs", headers={CSRF: csrf})).status_code == 200
    token_id = tokens.token_id(writer)
    assert token_id is not None
    await env.store.revoke_token(token_id, env.clock.now())
    assert (await browser.get("/ui/api/v1/jobs", headers={CSRF: csrf})).status_code == 401
    assert len(env.app.state.ui_sessions) == 0
    assert (await browser.get("/ui/session")).status_code == 401


def test_sessions_are_bounded() -> None:
    sessions = ui.Sessions(ManualClock(START), limit=3)
    ids = [sessions.open(f"token-{n}")[0] for n in range(5)]
    assert len(sessions) == 3
    assert sessions.get(ids[0]) is None
    assert sessions.get(ids[4]) is not None


async def test_the_bridge_forwards_path_query_and_headers(env: Env, browser: httpx.AsyncClient) -> None:
    csrf = await _login(browser, env.admin_token)
    created = await browser.post("/ui/api/v1/jobs", json=job_body("nightly"), headers={CSRF: csrf})
    job_id, etag = created.json()["id"], created.headers["etag"]
    by_name = await browser.get("/ui/api/v1/teams/data/jobs/nightly", headers={CSRF: csrf})
    assert by_name.json()["id"] == job_id
    listed = await browser.get(
        "/ui/api/v1/jobs", params={"label": "tier=gold", "limit": 1}, headers={CSRF: csrf}
    )
    assert [job["id"] for job in listed.json()["items"]] == [job_id]
    stale = {CSRF: csrf, "If-Match": '"99"'}
    assert (
        await browser.patch(f"/ui/api/v1/jobs/{job_id}", json={"description": "x"}, headers=stale)
    ).status_code == 412
    fresh = {CSRF: csrf, "If-Match": etag}
    assert (
        await browser.patch(f"/ui/api/v1/jobs/{job_id}", json={"description": "x"}, headers=fresh)
    ).status_code == 200


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/v1/jobs", 401),
        ("/v1/ui/api/jobs", 401),
        ("/ui/other", 401),
        ("/ui/api/v1/jobs", None),
        ("/ui/session", None),
    ],
)
def test_the_csrf_header_stands_in_for_authorization_on_the_dashboards_paths_only(
    path: str, status: int | None
) -> None:
    headers = {"host": "cronwheel.test", "x-cronwheel-csrf": "anything", "sec-fetch-site": "same-origin"}
    refused = guard.refusal("POST", path, headers, SERVED)
    assert (None if refused is None else refused.status) == status

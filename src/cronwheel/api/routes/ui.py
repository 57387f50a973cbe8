"""The web dashboard at ``/ui``: static pages from the package, a cookie session, and a bridge that
turns a session's request into an ordinary ``/v1`` API request.

Design (docs/security.md, "The dashboard's session"):

* **The page** (``/ui/``, assets under ``/ui/assets``) is plain HTML, CSS and ES modules shipped in
  ``static/ui``: no build step, no CDN. Public like ``/docs``: it holds no data. It is served with a
  strict Content-Security-Policy (scripts, styles and connections of this origin only, no framing).
* **Login** (``POST /ui/session``) takes the credential the way the API does: ``Authorization:
  Bearer <token>`` (an API token, or an OIDC JWT where configured), checked by
  :func:`cronwheel.api.callers.auth.authenticate`, the API's own function. The answer sets a cookie holding
  a random session id (never the token): ``HttpOnly`` (no script reads it), ``SameSite=Strict`` (no
  other site's page makes the browser send it), ``Path=/ui`` (it never reaches ``/v1``), ``Secure``
  over https. The token stays in this process's memory, never in a URL, a cookie or the page's
  storage. The answer also carries the session's CSRF token, which the page keeps in a variable.
* **Every data request** of the page goes to ``/ui/api/v1/...`` (:class:`SessionBridge`) with the
  cookie and the CSRF token in ``X-Cronwheel-CSRF``. The bridge checks both, then hands the request
  to the app itself as ``/v1/...`` with ``Authorization: Bearer <the session's token>`` and without
  the cookie: the same routes, authentication (revocation and expiry hold at once), team walls,
  scopes, validation, rate limits and audit log as any API client. ``/v1`` never reads a cookie.
* **CSRF**: a state change must carry a header no cross-site "simple" request can carry (the
  request guard, :mod:`cronwheel.api.guards.host`, asks for it on ``/ui/api`` and ``/ui/session`` in place
  of ``Authorization``), whose value is the session's own secret (checked here, in constant time);
  the guard's ``Sec-Fetch-Site``/``Origin`` and JSON-body checks apply as to any state change; and
  the cookie is ``SameSite=Strict``. The bridge asks for the CSRF header on reads too, but for
  the event stream (``GET /ui/api/v1/events``): a browser's ``EventSource`` sends no header of its
  own, so that read is taken with the cookie alone when ``Sec-Fetch-Site`` says the page is of
  this origin (or the browser sends none); it changes nothing, and another origin's page could not
  read it (no CORS). The bridge passes each message of the answer on as it comes (streams are
  not buffered) and the client's disconnect back, which ends the stream.
* **Sessions** live in the memory of the process that opened them (:class:`Sessions`): an idle
  hour or twelve hours in all ends one, as does logout or a 401 from the API (the token was
  revoked or expired). Several api processes behind a load balancer need sticky sessions.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import posixpath
import re
import secrets
from collections import OrderedDict
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import FastAPI, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cronwheel.api.callers.auth import authenticate, client_address
from cronwheel.api.problems import problem_response
from cronwheel.api.services import ApiServices
from cronwheel.auth.identity import Caller
from cronwheel.clock import Clock
from cronwheel.errors import UnauthenticatedError

ASSETS = Path(__file__).parents[1] / "static" / "ui"
PAGE, SESSION, BRIDGE = "/ui/", "/ui/session", "/ui/api"
CSRF_HEADER = "x-cronwheel-csrf"
COOKIE = "cronwheel_session"
COOKIE_PATH = "/ui"
IDLE = timedelta(hours=1)
LIFETIME = timedelta(hours=12)
MAX_SESSIONS = 10_000
_DROPPED = frozenset({b"cookie", b"authorization", CSRF_HEADER.encode()})
EVENTS = "/v1/events"  # the read an EventSource makes, without the CSRF header (module docstring)
_OWN_ORIGIN = frozenset({"same-origin", "none"})

NO_STORE = {"Cache-Control": "no-store"}
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Frame-Options": "DENY",  # X-Content-Type-Options: every answer of the app (api.nosniff)
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


@dataclass(frozen=True, slots=True)
class Session:
    credential: str  # the bearer the session acts with (kept in memory only)
    csrf: str
    opened: datetime
    seen: datetime


class Sessions:
    """The open sessions of this process, by the SHA-256 of their id (the id itself is kept only in
    the browser's cookie), oldest use first; at most :data:`MAX_SESSIONS` (the least recently used
    goes first)."""

    def __init__(self, clock: Clock, limit: int = MAX_SESSIONS) -> None:
        self.clock = clock
        self.limit = limit
        self._open: OrderedDict[str, Session] = OrderedDict()

    def open(self, credential: str) -> tuple[str, Session]:
        session_id = secrets.token_urlsafe(32)
        now = self.clock.now()
        session = Session(credential, secrets.token_urlsafe(32), now, now)
        self._open[_digest(session_id)] = session
        while len(self._open) > self.limit:
            self._open.popitem(last=False)
        return session_id, session

    def get(self, session_id: str | None) -> Session | None:
        """The live session of ``session_id`` (its last use now), or None."""
        if not session_id:
            return None
        key = _digest(session_id)
        session = self._open.get(key)
        if session is None:
            return None
        now = self.clock.now()
        if now - session.seen > IDLE or now - session.opened > LIFETIME:
            del self._open[key]
            return None
        session = replace(session, seen=now)
        self._open[key] = session
        self._open.move_to_end(key)
        return session

    def close(self, session_id: str | None) -> None:
        if session_id:
            self._open.pop(_digest(session_id), None)

    def __len__(self) -> int:
        return len(self._open)


def _digest(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


def csrf_ok(session: Session, presented: str | None) -> bool:
    return presented is not None and hmac.compare_digest(session.csrf.encode(), presented.encode())


def install(app: FastAPI) -> None:
    """Serve the dashboard on ``app`` (see the module docstring)."""
    sessions = Sessions(app.state.services.clock)
    app.state.ui_sessions = sessions
    app.add_api_route("/ui", _to_page, methods=["GET"], include_in_schema=False)
    app.add_api_route(PAGE, _page, methods=["GET"], include_in_schema=False)
    app.add_api_route(SESSION, _whoami, methods=["GET"], include_in_schema=False)
    app.add_api_route(SESSION, _login, methods=["POST"], include_in_schema=False)
    app.add_api_route(SESSION, _logout, methods=["DELETE"], include_in_schema=False)
    app.mount(BRIDGE, SessionBridge(app, sessions), name="ui-api")
    app.mount("/ui/assets", StaticFiles(directory=ASSETS), name="ui-assets")


async def _to_page() -> RedirectResponse:
    return RedirectResponse("ui/", status_code=307)  # relative: right behind a proxy's prefix too


_STATIC_IMPORT = re.compile(r'^import .* from "([^"]+)";$', re.M)  # a dynamic import() loads when asked
_ENTRY = '<script type="module" src="assets/app.js"></script>'


def preloaded_modules(entry: str = "app.js") -> list[str]:
    """The modules of static/ui that ``entry`` needs before it runs: its static imports, followed."""
    seen: set[str] = set()
    todo = [entry]
    while todo:
        name = todo.pop()
        for target in _STATIC_IMPORT.findall((ASSETS / name).read_text()):
            module = posixpath.normpath(posixpath.join(posixpath.dirname(name), target))
            if module not in seen:
                seen.add(module)
                todo.append(module)
    return sorted(seen)


@functools.cache
def _page_html() -> str:
    """index.html with a ``modulepreload`` link per module the app needs: the browser fetches them
    all at once instead of one level of imports after another."""
    links = "".join(f'<link rel="modulepreload" href="assets/{name}">\n  ' for name in preloaded_modules())
    return (ASSETS / "index.html").read_text().replace(_ENTRY, links + _ENTRY)


async def _page() -> HTMLResponse:
    return HTMLResponse(_page_html(), headers=SECURITY_HEADERS)


def _sessions(request: Request) -> Sessions:
    sessions = request.app.state.ui_sessions
    assert isinstance(sessions, Sessions)
    return sessions


def _services(request: Request) -> ApiServices:
    services = request.app.state.services
    assert isinstance(services, ApiServices)
    return services


def _describe(caller: Caller, session: Session) -> dict[str, Any]:
    return {
        "csrf": session.csrf,
        "caller": {
            "kind": caller.kind.value,
            "name": caller.name,
            "teams": None if caller.teams is None else sorted(caller.teams),
            "scopes": sorted(scope.value for scope in caller.scopes),
        },
    }


def _refused(request: Request, status: int, detail: str) -> JSONResponse:
    slug, title = ("unauthenticated", "Unauthenticated") if status == 401 else ("csrf", "Forbidden")
    response = problem_response(request, status, slug, title, detail, headers=NO_STORE)
    if status == 401:
        response.delete_cookie(COOKIE, path=_cookie_path(request))
    return response


def _cookie_path(request: Request) -> str:
    """``/ui`` under the app's root path (a proxy's prefix), wherever in the app ``request`` is."""
    root: str = request.scope.get("app_root_path", request.scope.get("root_path", ""))
    return root.rstrip("/") + COOKIE_PATH


async def _login(request: Request) -> Response:
    """Open a session for the bearer of ``Authorization`` (401 as the API would answer it)."""
    header = request.headers.get("authorization", "")
    scheme, _, credential = header.partition(" ")
    if scheme.lower() != "bearer" or not credential.strip():
        return _refused(request, 401, "log in with 'Authorization: Bearer <token>'")
    try:
        caller = await authenticate(_services(request), credential.strip(), client_address(request))
    except UnauthenticatedError as error:
        return _refused(request, 401, str(error))
    sessions = _sessions(request)
    sessions.close(request.cookies.get(COOKIE))  # a new id at every login: no fixation
    session_id, session = sessions.open(credential.strip())
    response = JSONResponse(_describe(caller, session), status_code=201, headers=NO_STORE)
    response.set_cookie(
        COOKIE, session_id, max_age=int(LIFETIME.total_seconds()), path=_cookie_path(request),
        secure=request.url.scheme == "https", httponly=True, samesite="strict",
    )  # fmt: skip
    return response


async def _whoami(request: Request) -> Response:
    """The session's caller and CSRF token (the page asks on load); 401 without a live session."""
    session = _sessions(request).get(request.cookies.get(COOKIE))
    if session is None:
        return _refused(request, 401, "no session: log in")
    try:
        caller = await authenticate(_services(request), session.credential, client_address(request))
    except UnauthenticatedError as error:
        _sessions(request).close(request.cookies.get(COOKIE))
        return _refused(request, 401, str(error))
    return JSONResponse(_describe(caller, session), headers=NO_STORE)


async def _logout(request: Request) -> Response:
    sessions = _sessions(request)
    session_id = request.cookies.get(COOKIE)
    session = sessions.get(session_id)
    if session is None:
        return _refused(request, 401, "no session: log in")
    if not csrf_ok(session, request.headers.get(CSRF_HEADER)):
        return _refused(request, 403, f"the {CSRF_HEADER} header is missing or wrong")
    sessions.close(session_id)
    response = Response(status_code=204, headers=NO_STORE)
    response.delete_cookie(COOKIE, path=_cookie_path(request))
    return response


class SessionBridge:
    """ASGI app at ``/ui/api``: a session's request for ``/ui/api/v1/X`` becomes the app's own request
    for ``/v1/X``, authenticated by the session's bearer (see the module docstring)."""

    def __init__(self, root: ASGIApp, sessions: Sessions) -> None:
        self.root = root
        self.sessions = sessions

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # pragma: no cover - no websockets here
            return
        request = Request(scope)
        session_id = request.cookies.get(COOKIE)
        session = self.sessions.get(session_id)
        refused: Response | None = None
        rest = _route_path(scope)
        if session is None:
            refused = _refused(request, 401, "no session: log in")
        elif not csrf_ok(session, request.headers.get(CSRF_HEADER)) and not _event_stream(request, rest):
            refused = _refused(request, 403, f"the {CSRF_HEADER} header is missing or wrong")
        elif not _forwarded(rest):
            refused = problem_response(request, 404, None, "Not Found", "the dashboard reaches /v1 only")
        if refused is not None or session is None:
            assert refused is not None
            await refused(scope, receive, send)
            return
        await self.root(self._inner(scope, rest, session), receive, self._watch(send, session_id))

    @staticmethod
    def _inner(scope: Scope, rest: str, session: Session) -> Scope:
        root = scope.get("app_root_path", "")
        headers = [(name, value) for name, value in scope["headers"] if name.lower() not in _DROPPED]
        headers.append((b"authorization", f"Bearer {session.credential}".encode("latin-1")))
        path = root + rest
        raw = quote(path, safe="/:@!$&'()*+,;=-._~").encode()
        return {**scope, "path": path, "raw_path": raw, "root_path": root, "headers": headers}

    def _watch(self, send: Send, session_id: str | None) -> Send:
        """``send``, ending the session when the API answers 401 (its token no longer holds)."""

        async def watched(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 401:
                self.sessions.close(session_id)
            await send(message)

        return watched


def _event_stream(request: Request, rest: str) -> bool:
    """Whether this is an ``EventSource``'s read of the event stream from a page of this origin."""
    site = request.headers.get("sec-fetch-site")
    return request.method == "GET" and rest == EVENTS and (site is None or site in _OWN_ORIGIN)


def _forwarded(rest: str) -> bool:
    """Whether the bridge passes ``rest`` on: a ``/v1/`` path without ``.`` or ``..`` segments."""
    return rest.startswith("/v1/") and not any(part in (".", "..") for part in rest.split("/"))


def _route_path(scope: Scope) -> str:
    """The part of the path after ``/ui/api`` (Starlette's mount puts the prefix in ``root_path``)."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    return path[len(root) :] if root and path.startswith(root) else path

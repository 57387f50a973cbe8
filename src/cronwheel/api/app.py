"""The FastAPI application: ``create_app(services)`` builds it around the services it is given.

Nothing is global: the :class:`ApiServices` live on ``app.state`` and routes reach them through a
dependency, so one process can serve several apps (tests do) and every role wires its own.
OpenAPI is served at ``/openapi.json`` and the interactive docs at ``/docs``, whose Swagger UI
assets come from the package (:mod:`cronwheel.api.routes.docs`), not from a CDN. Both are readable
without a token (the document is the same for every server and holds no data; Swagger UI must
read it before its user can authorize), behind the same Host check as everything else
(:mod:`cronwheel.api.guards.host`). Every answer says ``X-Content-Type-Options: nosniff``
(:mod:`cronwheel.api.guards.nosniff`). The web dashboard is at ``/ui`` (:mod:`cronwheel.api.routes.ui`).
"""

from __future__ import annotations

from fastapi import Depends, FastAPI
from starlette.types import ASGIApp

from cronwheel import __version__
from cronwheel.api import openapi, problems
from cronwheel.api.callers.access import AccessPolicy
from cronwheel.api.guards import limits
from cronwheel.api.guards.host import RequestGuard
from cronwheel.api.guards.nosniff import NoSniff
from cronwheel.api.guards.observe import RequestMetrics
from cronwheel.api.routes import (
    audit,
    backfills,
    calendars,
    docs,
    events,
    jobs,
    notifications,
    output,
    runs,
    secrets,
    system,
    tokens,
    ui,
)
from cronwheel.api.schemas import storable
from cronwheel.api.services import ApiServices, Readiness, store_readiness

__all__ = ["AccessPolicy", "ApiServices", "Readiness", "create_app", "store_readiness"]


class _App(FastAPI):
    """FastAPI, with :class:`NoSniff` around everything, Starlette's error middleware included."""

    def build_middleware_stack(self) -> ASGIApp:
        return NoSniff(super().build_middleware_stack())


def create_app(services: ApiServices) -> FastAPI:
    app = _App(
        docs_url=None,  # served by cronwheel.api.routes.docs from the package's own assets
        redoc_url=None,
        swagger_ui_oauth2_redirect_url=None,  # the API has no OAuth
        title="cronwheel",
        version=__version__,
        description=(
            "Register cron jobs, pause, resume and trigger them, and read their runs. "
            "Errors are RFC 9457 problem details (`application/problem+json`). "
            "No string of a request (body, query or path; keys of free JSON such as a payload "
            "included) may hold U+0000 or a lone surrogate (U+D800 to U+DFFF): no store can hold "
            "them, and such a request is a 422 naming the field (`unstorable_text`). "
            "Job responses carry an `ETag` (the job's version); send it back in `If-Match` "
            "to make an edit conditional (412 when the job changed meanwhile). "
            "Every endpoint but `/healthz`, `/readyz`, the docs and (unless protected) `/metrics` "
            "needs a token: `Authorization: Bearer <token>` (`cronwheel tokens create`)."
        ),
    )
    app.state.services = services
    problems.install(app)
    app.add_middleware(RequestGuard, policy=services.access)  # before anything: Host, cross-site
    limits.install(app)
    openapi.install(app)
    docs.install(app)
    ui.install(app)  # the dashboard at /ui (cronwheel.api.routes.ui): its session bridge calls /v1 itself
    # Every string a /v1 route takes is checked once, for what both stores can hold, once the
    # caller is admitted (cronwheel.api.schemas.storable).
    per_request = [*limits.PER_REQUEST, Depends(storable.storable_request)]
    for routes in (
        jobs.router,
        backfills.router,
        runs.router,
        system.router,
        tokens.router,
        secrets.router,
        calendars.router,
        audit.router,
        notifications.router,
        output.router,
        events.router,
    ):
        app.include_router(routes, prefix="/v1", dependencies=per_request, responses=limits.RESPONSES)
    app.include_router(system.system_router)
    app.include_router(system.system_router, prefix="/v1", include_in_schema=False)
    app.add_middleware(RequestMetrics)  # outermost: counts every answer, refusals included
    return app

"""The system's routes: ``/healthz``, ``/readyz`` and ``/metrics`` (also without ``/v1``), the
schedule preview and the cluster's status."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import BaseModel

from cronwheel.api import operations
from cronwheel.api.callers.auth import CallerDep, authenticate, client_address, require_every_team
from cronwheel.api.openapi import PROBLEM_DOC
from cronwheel.api.problems import ProblemError
from cronwheel.api.routes.common import Services, problems_doc
from cronwheel.api.schemas.preview import PreviewIn, PreviewOut
from cronwheel.api.schemas.upcoming import MAX_WINDOW_S, UpcomingOut
from cronwheel.auth.identity import Scope
from cronwheel.cluster import gauges as metrics_live

router = APIRouter()
system_router = APIRouter(tags=["system"])

# -- schedules -----------------------------------------------------------------------------------


@router.post(
    "/schedules/preview",
    response_model=PreviewOut,
    tags=["schedules"],
    responses=problems_doc(400, 401, 403, 422),
)
async def preview_schedule(body: PreviewIn, services: Services, caller: CallerDep) -> PreviewOut:
    """The next fire times of an expression in a zone, with DST effects and warnings (the same
    JSON as ``cronwheel schedule preview -o json``)."""
    return await operations.preview_schedule(services, caller, body)


@router.get(
    "/schedules/upcoming",
    response_model=UpcomingOut,
    tags=["schedules"],
    responses=problems_doc(401, 403, 422),
)
async def upcoming_fires(
    services: Services,
    caller: CallerDep,
    window: Annotated[
        int, Query(ge=60, le=MAX_WINDOW_S, description="The window's length in seconds.")
    ] = 3600,
    bucket: Annotated[
        int,
        Query(ge=1, le=3600, description="A bucket's length in seconds (the last one ends with the window)."),
    ] = 1,
) -> UpcomingOut:
    """How many jobs of the token's teams fire in each bucket of the coming window, by team: the
    herd coming (live, unpaused jobs; DST, jitter, start/end and calendars honoured)."""
    return await operations.upcoming_fires(services, caller, window, bucket)


# -- system --------------------------------------------------------------------------------------


class Health(BaseModel):
    status: str


class Ready(BaseModel):
    status: str
    checks: dict[str, bool]


@system_router.get("/healthz", response_model=Health)
async def healthz() -> Health:
    """The process is up (no backend is consulted)."""
    return Health(status="ok")


@system_router.get(
    "/readyz",
    response_model=Ready,
    responses={503: {"description": "A check failed (problem details with `checks`)", **PROBLEM_DOC}},
)
async def readyz(services: Services) -> Response:
    """Ready to serve: every readiness check passes (else 503 naming the failed ones)."""
    try:
        checks = await services.ready()
    except Exception:
        checks = {"readiness": False}
    failed = sorted(name for name, ok in checks.items() if not ok)
    if failed:
        raise ProblemError(
            503, "not-ready", "Not ready", f"failing checks: {', '.join(failed)}", checks=checks
        )
    return JSONResponse(Ready(status="ready", checks=checks).model_dump())


@system_router.get("/metrics", response_class=Response, include_in_schema=True)
async def prometheus_metrics(request: Request, services: Services) -> Response:
    """Prometheus metrics of this process (docs/operations.md lists them): fire and start
    lateness histograms, runs by outcome, attempts, queue depth and lag, shards and leadership,
    API requests. Public unless the operator protects it (``--protect-metrics``:
    a token of every team with the ``read`` scope)."""
    if services.access.protect_metrics:
        scheme, _, credential = request.headers.get("authorization", "").partition(" ")
        bearer = credential.strip() if scheme.lower() == "bearer" else None
        caller = await authenticate(services, bearer, client_address(request))
        require_every_team(caller, Scope.READ, "/metrics")
    return Response(await metrics_live.scrape(), media_type=CONTENT_TYPE_LATEST)


@router.get("/cluster", tags=["cluster"], responses=problems_doc(401, 403, 404))
async def cluster_status(services: Services, caller: CallerDep) -> dict[str, Any]:
    """Nodes with roles and last heartbeat, the leader, shard ownership with epochs, queue depth
    and lag per queue, and how many runs are PENDING, RUNNING and RETRYING (an admin token of
    every team: this is the whole cluster's)."""
    return await operations.cluster_status(services, caller)

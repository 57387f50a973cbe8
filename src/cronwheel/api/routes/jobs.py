"""The API's routes: thin. Validate (pydantic, at this boundary only), read HTTP's own inputs
(headers, query), call :mod:`cronwheel.api.operations` (where every decision lives, shared with
the gRPC API), and answer with the model it returns. Errors are raised and turned into problem
details by :mod:`cronwheel.api.problems`.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import BaseModel

from cronwheel.api import operations
from cronwheel.api.addressing import job_route
from cronwheel.api.callers.auditing import ActorDep
from cronwheel.api.callers.auth import CallerDep, authenticate, client_address, require_every_team
from cronwheel.api.openapi import PROBLEM_DOC
from cronwheel.api.operations import LABEL_HELP, RECENT_RUNS
from cronwheel.api.problems import ProblemError, field_error
from cronwheel.api.schemas.jobs import (
    Documented,
    JobCreate,
    JobOut,
    JobPage,
    JobPatch,
    JobUpdate,
    JobValidation,
    PauseIn,
    PreviewIn,
    PreviewOut,
    ResumeIn,
    RunDetailOut,
    RunOut,
    RunPage,
    RunStateName,
    TriggerIn,
)
from cronwheel.api.schemas.queries import (
    DEFAULT_LIMIT,
    CursorText,
    Includes,
    LabelFilters,
    PageLimit,
    Short,
    States,
)
from cronwheel.api.services import ApiServices, get_services
from cronwheel.auth.identity import Scope
from cronwheel.cluster import gauges as metrics_live
from cronwheel.model import RunState

T = TypeVar("T")
Services = Annotated[ApiServices, Depends(get_services)]


async def bind_checks(services: Services) -> None:
    """The server's policy and clock, for the checks that run while a job body is validated
    (async: it must run in the request's task, see cronwheel.api.schemas.checks)."""
    operations.bind_checks(services)


CHECKED = [Depends(bind_checks)]  # on the routes that validate a job body
# A job's ETag ("3", W/"3", or bare 3) or "*". 18 digits: any version, and never more digits than
# int() converts (a longer number, or a non-ASCII digit such as "²", would otherwise be a 500).
ETAG = re.compile(r'(?:\*|(?:W/)?"[0-9]{1,18}"|[0-9]{1,18})')
IfMatch = Annotated[
    Annotated[str, Documented(pattern=f"^{ETAG.pattern}$")] | None,
    Header(description='Make the write conditional on the job\'s version: the ETag of a read, like "3".'),
]
# The list endpoints' query parameters: their constraints are cronwheel.api.schemas.queries' (gRPC's too).
Cursor = Annotated[CursorText | None, Query()]
Limit = Annotated[PageLimit, Query()]

_PROBLEM_DOC = PROBLEM_DOC


def _problems(*statuses: int) -> dict[int | str, dict[str, Any]]:
    descriptions = {
        400: "Malformed JSON or header",
        401: "No token, or one that is invalid, expired or revoked",
        403: "The token lacks the scope, or may not set a field (another team, a reserved target)",
        404: "No such job or run (or one of a team the token is not of)",
        409: "A live job of this team already has this name, or the team has its quota of live jobs",
        412: "If-Match does not match the job's version",
        422: "Invalid input; nothing was written",
    }
    return {status: {"description": descriptions[status], **_PROBLEM_DOC} for status in statuses}


router = APIRouter()
system_router = APIRouter(tags=["system"])


# -- helpers -------------------------------------------------------------------------------------


def _job_response(job: JobOut, status: int = 200, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(
        job.model_dump(mode="json"),
        status_code=status,
        headers={"ETag": f'"{job.version}"', **(headers or {})},
    )


def parse_if_match(value: str | None) -> int | None:
    """The version an ``If-Match`` header names (``"3"``, ``W/"3"`` or ``3``); None for absent or
    ``*``."""
    if value is None:
        return None
    if not ETAG.fullmatch(value):
        raise ProblemError(
            400, "bad-header", "Bad request", 'If-Match must be a job ETag such as "3"',
            errors=[field_error("If-Match", "not an ETag of this API", "header", code="bad_etag")],
        )  # fmt: skip
    return None if value == "*" else int(value.removeprefix("W/").strip('"'))


job_for = operations.job_for  # the notification routes' (cronwheel.api.routes.notifications)


# -- jobs ----------------------------------------------------------------------------------------


@router.post(
    "/jobs",
    status_code=201,
    response_model=JobOut,
    tags=["jobs"],
    responses=_problems(400, 401, 403, 409, 422),
    dependencies=CHECKED,
)
async def create_job(body: JobCreate, services: Services, caller: CallerDep, actor: ActorDep) -> JSONResponse:
    """Register a job. Its first slot is computed at once (``next_run_at``); a job that would
    never fire is refused."""
    job = await operations.create_job(services, caller, actor, body)
    return _job_response(job, 201, {"Location": f"/v1/jobs/{job.id}"})


# Validation answers what create and replace would, writing nothing: the same scope, the same
# checks of who may set what, the same service checks (JobService.check_new / check_edit). A name
# taken or a full team is found only by the writing transaction (409), so not here. A new job's is
# a custom method of the collection, /v1/jobs:validate: /v1/jobs/validate would also be the path
# of a job whose id is "validate" (GET, PUT, ... answer it), so its Allow would name them all.


@router.post(
    "/jobs:validate",
    response_model=JobValidation,
    tags=["jobs"],
    responses=_problems(400, 401, 403, 422),
    dependencies=CHECKED,
)
async def validate_job(body: JobCreate, services: Services, caller: CallerDep) -> JobValidation:
    """Check a new job's definition as ``POST /v1/jobs`` would, writing nothing: 200 with the
    definition as it would be stored, its first slot, the schedule in words and its next fire
    times, or the 422 create would answer. ``H`` hashes the empty seed here (a new job's id is
    not known before it is created)."""
    return await operations.validate_job(services, caller, body)


@router.get("/jobs", response_model=JobPage, tags=["jobs"], responses=_problems(401, 403, 422))
async def list_jobs(
    services: Services,
    caller: CallerDep,
    team: Annotated[Short | None, Query()] = None,
    name: Annotated[Short | None, Query()] = None,
    label: Annotated[LabelFilters, Query(description=LABEL_HELP)] = [],  # noqa: B006
    paused: bool | None = None,
    last_state: Annotated[RunStateName | None, Query(description="State of the job's latest run")] = None,
    late: Annotated[
        bool, Query(description="Only late jobs: not paused, a slot more than 60 s past not fired yet")
    ] = False,
    include: Annotated[
        Includes, Query(description=f"recent: each job's {RECENT_RUNS} newest runs (for sparklines)")
    ] = [],  # noqa: B006
    limit: Limit = DEFAULT_LIMIT,
    cursor: Cursor = None,
) -> JobPage:
    """List the live jobs of the token's teams, oldest first, a page at a time (follow
    ``next_cursor``)."""
    return await operations.list_jobs(
        services, caller, team=team, name=name, labels=label, paused=paused,
        last_state=None if last_state is None else RunState(last_state), late=late,
        include=include, limit=limit, cursor=cursor,
    )  # fmt: skip


@job_route(router, "GET", response_model=JobOut, tags=["jobs"], responses=_problems(401, 403, 404))
async def get_job(job_id: str, services: Services, caller: CallerDep) -> JSONResponse:
    return _job_response(await operations.get_job(services, caller, job_id))


@job_route(
    router,
    "PUT",
    response_model=JobOut,
    tags=["jobs"],
    responses=_problems(400, 401, 403, 404, 409, 412, 422),
    dependencies=CHECKED,
)
async def replace_job(
    job_id: str,
    body: JobUpdate,
    services: Services,
    caller: CallerDep,
    actor: ActorDep,
    if_match: IfMatch = None,
) -> JSONResponse:
    """Replace the job's definition (omitted fields go back to their defaults). Pause state and
    history are kept; the cursor restarts from now when the timing changed."""
    expected = parse_if_match(if_match)
    return _job_response(await operations.replace_job(services, caller, actor, job_id, body, expected))


@job_route(
    router,
    "PATCH",
    response_model=JobOut,
    tags=["jobs"],
    responses=_problems(400, 401, 403, 404, 409, 412, 422),
    dependencies=CHECKED,
)
async def patch_job(
    job_id: str,
    body: JobPatch,
    services: Services,
    caller: CallerDep,
    actor: ActorDep,
    if_match: IfMatch = None,
) -> JSONResponse:
    """Change only the fields given (``retry`` and ``misfire`` merge field by field)."""
    expected = parse_if_match(if_match)
    return _job_response(await operations.patch_job(services, caller, actor, job_id, body, expected))


@job_route(
    router,
    "POST",
    "/validate",
    response_model=JobValidation,
    tags=["jobs"],
    responses=_problems(400, 401, 403, 404, 422),
    dependencies=CHECKED,
)
async def validate_job_edit(
    job_id: str, body: JobUpdate, services: Services, caller: CallerDep
) -> JobValidation:
    """Check a whole new definition of the job as ``PUT`` would, writing nothing (see
    ``POST /v1/jobs:validate``)."""
    return await operations.validate_job_edit(services, caller, job_id, body)


@job_route(router, "DELETE", status_code=204, tags=["jobs"], responses=_problems(400, 401, 403, 404, 412))
async def delete_job(
    job_id: str, services: Services, caller: CallerDep, actor: ActorDep, if_match: IfMatch = None
) -> Response:
    """Delete the job (its runs stay readable; pending ones are not started)."""
    await operations.delete_job(services, caller, actor, job_id, parse_if_match(if_match))
    return Response(status_code=204)


@job_route(
    router,
    "POST",
    "/pause",
    response_model=JobOut,
    tags=["jobs"],
    responses=_problems(400, 401, 403, 404, 412, 422),
)
async def pause_job(
    job_id: str,
    services: Services,
    caller: CallerDep,
    actor: ActorDep,
    body: PauseIn | None = None,
    if_match: IfMatch = None,
) -> JSONResponse:
    """Stop firing the job; slots that pass meanwhile are dealt with on resume."""
    note = None if body is None else body.note
    job = await operations.pause_job(services, caller, actor, job_id, note, parse_if_match(if_match))
    return _job_response(job)


@job_route(
    router,
    "POST",
    "/resume",
    response_model=JobOut,
    tags=["jobs"],
    responses=_problems(400, 401, 403, 404, 412, 422),
)
async def resume_job(
    job_id: str,
    services: Services,
    caller: CallerDep,
    actor: ActorDep,
    body: ResumeIn | None = None,
    if_match: IfMatch = None,
) -> JSONResponse:
    """Fire the job again. ``missed``: what happens to the slots that passed while paused."""
    missed = "skip" if body is None else body.missed
    job = await operations.resume_job(services, caller, actor, job_id, missed, parse_if_match(if_match))
    return _job_response(job)


TRACEPARENT_HELP = (
    "W3C Trace Context: with tracing on (--tracing), the run's trace continues this one (the "
    "run's trace_id is its trace id); an invalid value starts a new trace. Ignored with tracing off."
)


@job_route(
    router,
    "POST",
    "/trigger",
    status_code=201,
    response_model=RunOut,
    tags=["jobs"],
    responses={
        200: {"description": "The run already created with this Idempotency-Key"},
        **_problems(400, 401, 403, 404, 422),
    },
)
async def trigger_job(
    job_id: str,
    services: Services,
    caller: CallerDep,
    actor: ActorDep,
    body: TriggerIn | None = None,
    idempotency_key: Annotated[
        str | None,
        Header(min_length=1, max_length=200, description="The same key returns the same run (200)."),
    ] = None,
    traceparent: Annotated[str | None, Header(description=TRACEPARENT_HELP)] = None,
    tracestate: Annotated[str | None, Header(description="W3C Trace Context, with traceparent.")] = None,
) -> JSONResponse:
    """Run the job now, once. With ``Idempotency-Key``, retries of this request return the run
    the first one created."""
    has_payload = body is not None and "payload" in body.model_fields_set
    payload = None if body is None else body.payload
    run, created = await operations.trigger_job(
        services, caller, actor, job_id, payload, has_payload, idempotency_key,
        traceparent=traceparent, tracestate=tracestate,
    )  # fmt: skip
    return JSONResponse(
        run.model_dump(mode="json"),
        status_code=201 if created else 200,
        headers={"Location": f"/v1/runs/{run.id}"},
    )


@job_route(
    router, "GET", "/runs", response_model=RunPage, tags=["runs"], responses=_problems(401, 403, 404, 422)
)
async def list_job_runs(
    job_id: str,
    services: Services,
    caller: CallerDep,
    state: Annotated[States, Query()] = [],  # noqa: B006
    limit: Limit = DEFAULT_LIMIT,
    cursor: Cursor = None,
) -> RunPage:
    """The job's runs, newest first (also those of a deleted job)."""
    states = tuple(RunState(s) for s in state)
    return await operations.list_job_runs(services, caller, job_id, states, limit, cursor)


# -- runs ----------------------------------------------------------------------------------------


@router.get("/runs", response_model=RunPage, tags=["runs"], responses=_problems(401, 403, 422))
async def list_runs(
    services: Services,
    caller: CallerDep,
    job_id: Annotated[Short | None, Query()] = None,
    state: Annotated[States, Query()] = [],  # noqa: B006
    limit: Limit = DEFAULT_LIMIT,
    cursor: Cursor = None,
) -> RunPage:
    """Runs of every job of the token's teams (or of one job), newest first."""
    states = tuple(RunState(s) for s in state)
    return await operations.list_runs(services, caller, job_id, states, limit, cursor)


@router.get("/runs/{run_id}", response_model=RunDetailOut, tags=["runs"], responses=_problems(401, 403, 404))
async def get_run(run_id: str, services: Services, caller: CallerDep) -> RunDetailOut:
    """One run with its attempts and its state history."""
    return await operations.get_run(services, caller, run_id)


# -- schedules -----------------------------------------------------------------------------------


@router.post(
    "/schedules/preview",
    response_model=PreviewOut,
    tags=["schedules"],
    responses=_problems(400, 401, 403, 422),
)
async def preview_schedule(body: PreviewIn, services: Services, caller: CallerDep) -> PreviewOut:
    """The next fire times of an expression in a zone, with DST effects and warnings (the same
    JSON as ``cronwheel schedule preview -o json``)."""
    return operations.preview_schedule(services, caller, body)


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
    responses={503: {"description": "A check failed (problem details with `checks`)", **_PROBLEM_DOC}},
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


@router.get("/cluster", tags=["cluster"], responses=_problems(401, 403, 404))
async def cluster_status(services: Services, caller: CallerDep) -> dict[str, Any]:
    """Nodes with roles and last heartbeat, the leader, shard ownership with epochs, queue depth
    and lag per queue, and how many runs are PENDING, RUNNING and RETRYING (an admin token of
    every team: this is the whole cluster's)."""
    return await operations.cluster_status(services, caller)

"""``/v1/jobs``: create, read, list, replace, patch, validate, delete, pause, resume and trigger
jobs, and a job's runs. Thin: validate (pydantic, at this boundary only), read HTTP's own inputs,
call :mod:`cronwheel.api.operations` (where every decision lives, shared with the gRPC API), answer.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query, Response
from fastapi.responses import JSONResponse

from cronwheel.api import operations
from cronwheel.api.addressing import job_route
from cronwheel.api.callers.auditing import ActorDep
from cronwheel.api.callers.auth import CallerDep
from cronwheel.api.operations import LABEL_HELP, RECENT_RUNS
from cronwheel.api.routes.common import (
    CHECKED,
    Cursor,
    IfMatch,
    Limit,
    Services,
    job_response,
    parse_if_match,
    problems_doc,
)
from cronwheel.api.schemas.base import RunStateName
from cronwheel.api.schemas.jobs import (
    JobCreate,
    JobOut,
    JobPage,
    JobPatch,
    JobUpdate,
    JobValidation,
    PauseIn,
    ResumeIn,
    TriggerIn,
)
from cronwheel.api.schemas.queries import (
    DEFAULT_LIMIT,
    Includes,
    LabelFilters,
    Short,
    States,
)
from cronwheel.api.schemas.runs import RunOut, RunPage
from cronwheel.model import RunState

router = APIRouter()

# -- jobs ----------------------------------------------------------------------------------------


@router.post(
    "/jobs",
    status_code=201,
    response_model=JobOut,
    tags=["jobs"],
    responses=problems_doc(400, 401, 403, 409, 422),
    dependencies=CHECKED,
)
async def create_job(body: JobCreate, services: Services, caller: CallerDep, actor: ActorDep) -> JSONResponse:
    """Register a job. Its first slot is computed at once (``next_run_at``); a job that would
    never fire is refused."""
    job = await operations.create_job(services, caller, actor, body)
    return job_response(job, 201, {"Location": f"/v1/jobs/{job.id}"})


# Validation answers what create and replace would, writing nothing: the same scope, the same
# checks of who may set what, the same service checks (JobService.check_new / check_edit). A name
# taken or a full team is found only by the writing transaction (409), so not here. A new job's is
# a custom method of the collection, /v1/jobs:validate: /v1/jobs/validate would also be the path
# of a job whose id is "validate" (GET, PUT, ... answer it), so its Allow would name them all.


@router.post(
    "/jobs:validate",
    response_model=JobValidation,
    tags=["jobs"],
    responses=problems_doc(400, 401, 403, 422),
    dependencies=CHECKED,
)
async def validate_job(body: JobCreate, services: Services, caller: CallerDep) -> JobValidation:
    """Check a new job's definition as ``POST /v1/jobs`` would, writing nothing: 200 with the
    definition as it would be stored, its first slot, the schedule in words and its next fire
    times, or the 422 create would answer. ``H`` hashes the empty seed here (a new job's id is
    not known before it is created)."""
    return await operations.validate_job(services, caller, body)


@router.get("/jobs", response_model=JobPage, tags=["jobs"], responses=problems_doc(401, 403, 422))
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


@job_route(router, "GET", response_model=JobOut, tags=["jobs"], responses=problems_doc(401, 403, 404))
async def get_job(job_id: str, services: Services, caller: CallerDep) -> JSONResponse:
    return job_response(await operations.get_job(services, caller, job_id))


@job_route(
    router,
    "PUT",
    response_model=JobOut,
    tags=["jobs"],
    responses=problems_doc(400, 401, 403, 404, 409, 412, 422),
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
    return job_response(await operations.replace_job(services, caller, actor, job_id, body, expected))


@job_route(
    router,
    "PATCH",
    response_model=JobOut,
    tags=["jobs"],
    responses=problems_doc(400, 401, 403, 404, 409, 412, 422),
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
    return job_response(await operations.patch_job(services, caller, actor, job_id, body, expected))


@job_route(
    router,
    "POST",
    "/validate",
    response_model=JobValidation,
    tags=["jobs"],
    responses=problems_doc(400, 401, 403, 404, 422),
    dependencies=CHECKED,
)
async def validate_job_edit(
    job_id: str, body: JobUpdate, services: Services, caller: CallerDep
) -> JobValidation:
    """Check a whole new definition of the job as ``PUT`` would, writing nothing (see
    ``POST /v1/jobs:validate``)."""
    return await operations.validate_job_edit(services, caller, job_id, body)


@job_route(router, "DELETE", status_code=204, tags=["jobs"], responses=problems_doc(400, 401, 403, 404, 412))
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
    responses=problems_doc(400, 401, 403, 404, 412, 422),
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
    return job_response(job)


@job_route(
    router,
    "POST",
    "/resume",
    response_model=JobOut,
    tags=["jobs"],
    responses=problems_doc(400, 401, 403, 404, 412, 422),
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
    return job_response(job)


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
        **problems_doc(400, 401, 403, 404, 422),
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
    router, "GET", "/runs", response_model=RunPage, tags=["runs"], responses=problems_doc(401, 403, 404, 422)
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

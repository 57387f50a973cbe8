"""The API's routes: thin. Validate (pydantic, at this boundary only), convert to records, call
the :class:`~cronwheel.service.JobService` or read the store, convert back. Errors are raised and
turned into problem details by :mod:`cronwheel.api.problems`.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Sequence
from typing import Annotated, Any, Literal, TypeVar

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import BaseModel, StringConstraints

from cronwheel import metrics_live
from cronwheel.api import checks
from cronwheel.api.addressing import job_route
from cronwheel.api.auditing import ActorDep
from cronwheel.api.auth import CallerDep, authenticate, require_every_team
from cronwheel.api.fields import check_settable
from cronwheel.api.openapi import PROBLEM_DOC
from cronwheel.api.problems import ProblemError, VersionConflictError, field_error
from cronwheel.api.problems import schedule_field_errors as _schedule_errors
from cronwheel.api.schemas import (
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
    job_update_from_json,
)
from cronwheel.api.services import ApiServices, get_services
from cronwheel.errors import ConflictError, InvalidInputError, NotFoundError
from cronwheel.identity import Caller, Scope
from cronwheel.lateness import late_before
from cronwheel.model import Job, Run, RunState
from cronwheel.schedule import ScheduleError
from cronwheel.store import JobQuery, RunQuery

T = TypeVar("T")
Services = Annotated[ApiServices, Depends(get_services)]


async def bind_checks(services: Services) -> None:
    """The server's policy and clock, for the checks that run while a job body is validated
    (async: it must run in the request's task, see cronwheel.api.checks)."""
    checks.bind(services.job_service.policy, services.clock.now())


CHECKED = [Depends(bind_checks)]  # on the routes that validate a job body
# A job's ETag ("3", W/"3", or bare 3) or "*". 18 digits: any version, and never more digits than
# int() converts (a longer number, or a non-ASCII digit such as "²", used to be a 500).
ETAG = re.compile(r'(?:\*|(?:W/)?"[0-9]{1,18}"|[0-9]{1,18})')
IfMatch = Annotated[
    Annotated[str, Documented(pattern=f"^{ETAG.pattern}$")] | None,
    Header(description='Make the write conditional on the job\'s version: the ETag of a read, like "3".'),
]
# What list pages return in next_cursor: base64url (checked here; which ones it made, by the store).
Cursor = Annotated[str | None, Query(max_length=1000, pattern=r"^[A-Za-z0-9_-]+={0,2}$")]
# key=value (_labels checks it); a key (100) = a value (200)
LabelFilter = Annotated[str, Documented(pattern=r"^[^=]+="), StringConstraints(max_length=301)]

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
            400, "bad-header", "Bad request", f'If-Match must be a job ETag such as "3", not {value[:40]!r}',
            errors=[field_error("If-Match", "not an ETag of this API", "header", code="bad_etag")],
        )  # fmt: skip
    return None if value == "*" else int(value.removeprefix("W/").strip('"'))


async def _summary(services: ApiServices, job: Job) -> JobOut:
    last = await services.store.last_runs([job.id])
    return JobOut.from_record(job, last.get(job.id), now=services.clock.now())


async def job_for(services: ApiServices, caller: Caller, job_id: str, scope: Scope) -> Job:
    """The live job ``job_id`` if ``caller`` may ``scope`` it: another team's job is absent
    (404, as a missing one), a missing scope on one's own team's job a 403."""
    job = await services.store.get_job(job_id)
    caller.require(scope, job.team, what=f"job {job_id}")
    return job


async def _check_version(services: ApiServices, caller: Caller, job_id: str, expected: int | None) -> Job:
    """The job a write acts on (``write`` scope, the caller's team), at the ``If-Match`` version."""
    job = await job_for(services, caller, job_id, Scope.WRITE)
    if expected is not None and job.version != expected:
        raise VersionConflictError(f"job {job_id} is at version {job.version}, not {expected} (If-Match)")
    return job


async def _conditional(services: ApiServices, job_id: str, expected: int | None, write: Awaitable[T]) -> T:
    """Run ``write``; a conflict while a version was expected is a 412 when the version moved."""
    try:
        return await write
    except ConflictError as error:
        if expected is None or isinstance(error, VersionConflictError):
            raise
        current = await services.store.get_job(job_id)
        if current.version != expected:
            raise VersionConflictError(
                f"job {job_id} is at version {current.version}, not {expected} (If-Match)"
            ) from None
        raise


async def _paged(read: Awaitable[T]) -> T:
    """A page read whose only input the store can refuse is the cursor."""
    try:
        return await read
    except InvalidInputError as error:
        raise ProblemError(
            422, "validation", "Invalid request", str(error),
            errors=[field_error("cursor", "not a cursor this API returned", "query", code="invalid_cursor")],
        ) from None  # fmt: skip


def _teams(caller: Caller) -> tuple[str, ...] | None:
    """The teams a listing is restricted to (in the store query): the caller's; None: every team."""
    return None if caller.teams is None else tuple(sorted(caller.teams))


# A query string must not multiply the work of one request past what any answer needs (1,000
# label filters made SQLite give up with "Expression tree is too large", answered as a 503): no job
# has more than MAX_LABELS labels, so more filters could match nothing, and a state filter lists
# each state at most once.
MAX_LABELS = 64  # what JobFields.labels allows a job
LABEL_HELP = f"key=value; repeat to require several (at most {MAX_LABELS}, as many as a job has)"


def _labels(values: list[str]) -> tuple[tuple[str, str], ...]:
    pairs: list[tuple[str, str]] = []
    for value in values:
        key, sep, label = value.partition("=")
        if not sep or not key:
            raise ProblemError(
                422, "validation", "Invalid request", f"label filter must be key=value, not {value!r}",
                errors=[field_error("label", "must be key=value", "query", code="string_pattern_mismatch")],
            )  # fmt: skip
        pairs.append((key, label))
    return tuple(pairs)


async def _runs_out(services: ApiServices, runs: Sequence[Run]) -> list[RunOut]:
    """``runs`` as answered, each with its job's team and name: one read of their jobs for the
    whole page, not one per run. A deleted job is not read back, so its runs show null."""
    jobs = await services.store.get_jobs(sorted({run.job_id for run in runs})) if runs else {}
    return [RunOut.from_record(run, jobs.get(run.job_id)) for run in runs]


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
    caller.require(Scope.WRITE)
    record = body.to_record()
    check_settable(caller, record, None, services)
    job = await services.job_service.create(record, actor)
    return _job_response(
        JobOut.from_record(job, now=services.clock.now()), 201, {"Location": f"/v1/jobs/{job.id}"}
    )


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
    caller.require(Scope.WRITE)
    record = body.to_record()
    check_settable(caller, record, None, services)
    checked = await services.job_service.check_new(record)
    return JobValidation.from_record(checked, services.clock.now())


RECENT_RUNS = 20  # runs per job that include=recent answers (a sparkline's points)
Include = Literal["recent"]


@router.get("/jobs", response_model=JobPage, tags=["jobs"], responses=_problems(401, 403, 422))
async def list_jobs(
    services: Services,
    caller: CallerDep,
    team: Annotated[str | None, Query(max_length=100)] = None,
    name: Annotated[str | None, Query(max_length=100)] = None,
    label: Annotated[list[LabelFilter], Query(max_length=MAX_LABELS, description=LABEL_HELP)] = [],  # noqa: B006
    paused: bool | None = None,
    last_state: Annotated[RunStateName | None, Query(description="State of the job's latest run")] = None,
    late: Annotated[
        bool, Query(description="Only late jobs: not paused, a slot more than 60 s past not fired yet")
    ] = False,
    include: Annotated[
        list[Include],
        Query(max_length=1, description=f"recent: each job's {RECENT_RUNS} newest runs (for sparklines)"),
    ] = [],  # noqa: B006
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    cursor: Cursor = None,
) -> JobPage:
    """List the live jobs of the token's teams, oldest first, a page at a time (follow
    ``next_cursor``)."""
    caller.require(Scope.READ)
    now = services.clock.now()
    query = JobQuery(
        team=team,
        teams=_teams(caller),
        name=name,
        labels=_labels(label),
        paused=paused,
        last_state=None if last_state is None else RunState(last_state),
        late_before=late_before(now) if late else None,
        limit=limit,
        cursor=cursor,
    )
    page = await _paged(services.store.list_jobs(query))
    ids = [job.id for job in page.items]
    last = await services.store.last_runs(ids) if ids else {}
    recent = await services.store.recent_runs(ids, RECENT_RUNS) if ids and "recent" in include else None
    return JobPage(
        items=[
            JobOut.from_record(
                job, last.get(job.id), now=now, recent=None if recent is None else recent.get(job.id, [])
            )
            for job in page.items
        ],
        next_cursor=page.next_cursor,
    )


@job_route(router, "GET", response_model=JobOut, tags=["jobs"], responses=_problems(401, 403, 404))
async def get_job(job_id: str, services: Services, caller: CallerDep) -> JSONResponse:
    job = await job_for(services, caller, job_id, Scope.READ)
    return _job_response(await _summary(services, job))


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
    stored = await _check_version(services, caller, job_id, expected)
    record = body.to_record(job_id)
    check_settable(caller, record, stored, services)
    job = await _conditional(services, job_id, expected, services.job_service.update(record, expected, actor))
    return _job_response(await _summary(services, job))


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
    for _ in range(3):
        current = await _check_version(services, caller, job_id, expected)
        update = job_update_from_json(body.apply_to(current))  # ValidationError: 422 by field
        record = update.to_record(job_id)
        check_settable(caller, record, current, services)
        version = current.version if expected is None else expected
        try:
            write = services.job_service.update(record, version, actor)
            job = await _conditional(services, job_id, version, write)
        except VersionConflictError:
            if expected is not None:
                raise
            continue  # someone else edited it between our read and write: merge again
        return _job_response(await _summary(services, job))
    raise ConflictError(f"job {job_id} kept changing during the patch; try again")


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
    stored = await job_for(services, caller, job_id, Scope.WRITE)
    record = body.to_record(job_id)
    check_settable(caller, record, stored, services)
    checked = await services.job_service.check_edit(record)
    return JobValidation.from_record(checked, services.clock.now())


@job_route(router, "DELETE", status_code=204, tags=["jobs"], responses=_problems(400, 401, 403, 404, 412))
async def delete_job(
    job_id: str, services: Services, caller: CallerDep, actor: ActorDep, if_match: IfMatch = None
) -> Response:
    """Delete the job (its runs stay readable; pending ones are not started)."""
    job = await _check_version(services, caller, job_id, parse_if_match(if_match))
    await services.job_service.delete(job_id, actor, job.team)
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
    expected = parse_if_match(if_match)
    await _check_version(services, caller, job_id, expected)
    note = None if body is None else body.note
    job = await _conditional(
        services, job_id, expected, services.job_service.pause(job_id, note, expected, actor)
    )
    return _job_response(await _summary(services, job))


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
    expected = parse_if_match(if_match)
    await _check_version(services, caller, job_id, expected)
    missed = "skip" if body is None else body.missed
    job = await _conditional(
        services, job_id, expected, services.job_service.resume(job_id, missed, expected, actor)
    )
    return _job_response(await _summary(services, job))


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
    await job_for(services, caller, job_id, Scope.TRIGGER)
    has_payload = body is not None and "payload" in body.model_fields_set
    payload = None if body is None else body.payload
    run, created = await services.job_service.trigger(
        job_id, payload, has_payload, idempotency_key, actor, traceparent=traceparent, tracestate=tracestate
    )
    run = await services.store.get_run(run.id)  # as queued (the service marks it after publishing)
    return JSONResponse(
        (await _runs_out(services, [run]))[0].model_dump(mode="json"),
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
    state: Annotated[list[RunStateName], Query(max_length=len(RunState))] = [],  # noqa: B006
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    cursor: Cursor = None,
) -> RunPage:
    """The job's runs, newest first (also those of a deleted job)."""
    team = await services.store.job_team(job_id)  # a deleted job's too: its runs stay readable
    if team is None:
        raise NotFoundError(f"job {job_id} not found")  # 404 only for a job that never existed
    caller.require(Scope.READ, team, what=f"job {job_id}")
    page = await _paged(
        services.store.list_runs(
            RunQuery(job_id=job_id, states=tuple(RunState(s) for s in state), limit=limit, cursor=cursor)
        )
    )
    return RunPage(items=await _runs_out(services, page.items), next_cursor=page.next_cursor)


# -- runs ----------------------------------------------------------------------------------------


@router.get("/runs", response_model=RunPage, tags=["runs"], responses=_problems(401, 403, 422))
async def list_runs(
    services: Services,
    caller: CallerDep,
    job_id: Annotated[str | None, Query(max_length=100)] = None,
    state: Annotated[list[RunStateName], Query(max_length=len(RunState))] = [],  # noqa: B006
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    cursor: Cursor = None,
) -> RunPage:
    """Runs of every job of the token's teams (or of one job), newest first."""
    caller.require(Scope.READ)
    states = tuple(RunState(s) for s in state)
    page = await _paged(
        services.store.list_runs(
            RunQuery(job_id=job_id, teams=_teams(caller), states=states, limit=limit, cursor=cursor)
        )
    )
    return RunPage(items=await _runs_out(services, page.items), next_cursor=page.next_cursor)


@router.get("/runs/{run_id}", response_model=RunDetailOut, tags=["runs"], responses=_problems(401, 403, 404))
async def get_run(run_id: str, services: Services, caller: CallerDep) -> RunDetailOut:
    """One run with its attempts and its state history."""
    run, team = await services.store.get_run_with_team(run_id)
    caller.require(Scope.READ, team, what=f"run {run_id}")
    attempts = await services.store.list_attempts(run_id)
    events = await services.store.list_events(run_id)
    jobs = await services.store.get_jobs([run.job_id])
    return RunDetailOut.from_records(run, jobs.get(run.job_id), attempts, events)


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
    caller.require(Scope.READ)
    try:
        return PreviewOut.build(body, services.clock.now())
    except ScheduleError as error:
        raise ProblemError(
            422,
            "invalid-schedule",
            "Invalid schedule",
            str(error),
            errors=_schedule_errors(error, "expression"),
        ) from None


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
        caller = await authenticate(services, credential.strip() if scheme.lower() == "bearer" else None)
        require_every_team(caller, Scope.READ, "/metrics")
    return Response(await metrics_live.scrape(), media_type=CONTENT_TYPE_LATEST)


@router.get("/cluster", tags=["cluster"], responses=_problems(401, 403, 404))
async def cluster_status(services: Services, caller: CallerDep) -> dict[str, Any]:
    """Nodes with roles and last heartbeat, the leader, shard ownership with epochs, queue depth
    and lag per queue, and how many runs are PENDING, RUNNING and RETRYING (an admin token of
    every team: this is the whole cluster's)."""
    require_every_team(caller, Scope.ADMIN, "cluster status")
    if services.cluster is None:
        raise ProblemError(404, "not-found", "Not found", "cluster status is not served by this process")
    return await services.cluster.snapshot()

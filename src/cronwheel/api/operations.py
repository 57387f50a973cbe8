"""What every call of the job, run, schedule and cluster API does, whatever carries it.

REST (:mod:`cronwheel.api.routes.jobs`) and gRPC (:mod:`cronwheel.grpc_api`) only translate: each
validates its request into the same pydantic models (:mod:`cronwheel.api.schemas.jobs`), calls one
function here with the authenticated :class:`~cronwheel.auth.identity.Caller` (and the
:class:`~cronwheel.audit.Actor` of a write), and turns the model it returns into its own answer.
Every decision lives here once: scopes and team walls, expected versions (REST's ``If-Match``,
gRPC's ``expected_version``) and how a conflict is told from a version that moved, the patch's
merge-and-retry, paging and label filters, idempotent triggers. Errors are cronwheel's own (and
:class:`~cronwheel.api.problems.ProblemError` for a refused query value, which names it); each
transport maps them once (:mod:`cronwheel.api.problems`, :mod:`cronwheel.grpc_api.errors`).

A job read by a caller who may not write it (no ``write`` scope) shows its plain credentials
masked (:func:`shown`); a writer sees them, so that a definition read and written back keeps them.

A job body's checks need the server's policy and clock bound first (:func:`bind_checks`), in
the task that validates the body (see :mod:`cronwheel.api.schemas.checks`).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Sequence
from datetime import datetime, timedelta
from typing import Any, Literal, TypeVar

from cronwheel.api.callers.auth import require_every_team
from cronwheel.api.events.topics import Topics
from cronwheel.api.problems import ProblemError, VersionConflictError, field_error
from cronwheel.api.problems import schedule_field_errors as _schedule_errors
from cronwheel.api.schemas import checks
from cronwheel.api.schemas.backfills import BackfillIn, BackfillOut, BackfillPage, BackfillPlanOut
from cronwheel.api.schemas.checks import schedule_sentence
from cronwheel.api.schemas.fields import check_settable
from cronwheel.api.schemas.jobs import (
    JobCreate,
    JobOut,
    JobPage,
    JobPatch,
    JobUpdate,
    JobValidation,
    job_update_from_json,
)
from cronwheel.api.schemas.preview import PreviewIn, PreviewOut
from cronwheel.api.schemas.runs import RunDetailOut, RunOut, RunPage
from cronwheel.api.schemas.upcoming import UpcomingOut
from cronwheel.api.services import ApiServices
from cronwheel.audit import Actor
from cronwheel.auth.identity import Caller, Scope
from cronwheel.errors import ConflictError, InvalidInputError, NotFoundError
from cronwheel.jobs.service import resolve_calendars
from cronwheel.lateness import late_before
from cronwheel.model import Job, Run, RunState, SkipReason
from cronwheel.schedule import ScheduleError
from cronwheel.scheduler import upcoming
from cronwheel.store import JobQuery, RunQuery
from cronwheel.targets.kinds import masked_credentials

T = TypeVar("T")

RECENT_RUNS = 20  # runs per job that include=recent answers (a sparkline's points)
Include = Literal["recent"]
# A query must not multiply the work of one request past what any answer needs (1,000 label
# filters made SQLite give up with "Expression tree is too large", answered as a 503): no job has
# more than MAX_LABELS labels, so more filters could match nothing.
MAX_LABELS = 64  # what JobFields.labels allows a job
LABEL_HELP = f"key=value; repeat to require several (at most {MAX_LABELS}, as many as a job has)"
PATCH_ROUNDS = 3  # merges a patch tries while others edit the job between its read and write


def bind_checks(services: ApiServices) -> None:
    """Bind the server's policy and clock for the checks that run while a job body is validated
    (call it in the task that validates; see :mod:`cronwheel.api.schemas.checks`)."""
    checks.bind(services.job_service.policy, services.clock.now())


# -- the decisions every call shares ----------------------------------------------------------------


async def job_for(services: ApiServices, caller: Caller, job_id: str, scope: Scope) -> Job:
    """The live job ``job_id`` if ``caller`` may ``scope`` it: another team's job is absent
    (404, as a missing one), a missing scope on one's own team's job a 403."""
    job = await services.store.get_job(job_id)
    caller.require(scope, job.team, what=f"job {job_id}")
    return job


async def check_version(services: ApiServices, caller: Caller, job_id: str, expected: int | None) -> Job:
    """The job a write acts on (``write`` scope, the caller's team), at the expected version."""
    job = await job_for(services, caller, job_id, Scope.WRITE)
    if expected is not None and job.version != expected:
        raise VersionConflictError(f"job {job_id} is at version {job.version}, not {expected} (If-Match)")
    return job


async def conditional(services: ApiServices, job_id: str, expected: int | None, write: Awaitable[T]) -> T:
    """Run ``write``; a conflict while a version was expected is a version conflict when the
    version moved."""
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


def bad_cursor(error: InvalidInputError) -> ProblemError:
    """The refusal of a cursor the store did not make (a 422 naming ``cursor``)."""
    return ProblemError(
        422, "validation", "Invalid request", str(error),
        errors=[field_error("cursor", "not a cursor this API returned", "query", code="invalid_cursor")],
    )  # fmt: skip


async def paged(read: Awaitable[T]) -> T:
    """A page read whose only input the store can refuse is the cursor."""
    try:
        return await read
    except InvalidInputError as error:
        raise bad_cursor(error) from None


def caller_teams(caller: Caller) -> tuple[str, ...] | None:
    """The teams a listing is restricted to (in the store query): the caller's; None: every team."""
    return None if caller.teams is None else tuple(sorted(caller.teams))


def label_pairs(values: Sequence[str]) -> tuple[tuple[str, str], ...]:
    pairs: list[tuple[str, str]] = []
    for value in values:
        key, sep, label = value.partition("=")
        if not sep or not key:
            raise ProblemError(
                422, "validation", "Invalid request", "label: a filter must be key=value",
                errors=[field_error("label", "must be key=value", "query", code="string_pattern_mismatch")],
            )  # fmt: skip
        pairs.append((key, label))
    return tuple(pairs)


def shown(caller: Caller, job: Job) -> Job:
    """``job`` as ``caller`` may read it: with the credentials its target holds in clear
    (:func:`cronwheel.targets.kinds.plain_credentials`) as ``***`` unless the caller may write jobs."""
    if caller.has(Scope.WRITE):
        return job
    masked = masked_credentials(job.target)
    return job if masked is job.target else dataclasses.replace(job, target=masked)


async def summary(services: ApiServices, job: Job) -> JobOut:
    last = await services.store.last_runs([job.id])
    return JobOut.from_record(job, last.get(job.id), now=services.clock.now())


async def runs_out(services: ApiServices, runs: Sequence[Run]) -> list[RunOut]:
    """``runs`` as answered, each with its job's team and name: one read of their jobs for the
    whole page, not one per run. A deleted job is not read back, so its runs show null."""
    jobs = await services.store.get_jobs(sorted({run.job_id for run in runs})) if runs else {}
    return [RunOut.from_record(run, jobs.get(run.job_id)) for run in runs]


# -- jobs -------------------------------------------------------------------------------------------


async def create_job(services: ApiServices, caller: Caller, actor: Actor, body: JobCreate) -> JobOut:
    caller.require(Scope.WRITE)
    record = body.to_record()
    check_settable(caller, record, None, services)
    job = await services.job_service.create(record, actor)
    return JobOut.from_record(job, now=services.clock.now())


async def validate_job(services: ApiServices, caller: Caller, body: JobCreate) -> JobValidation:
    """A new job's definition checked as :func:`create_job` would, writing nothing."""
    caller.require(Scope.WRITE)
    record = body.to_record()
    check_settable(caller, record, None, services)
    checked = await services.job_service.check_new(record)
    return JobValidation.from_record(checked, services.clock.now())


async def validate_job_edit(
    services: ApiServices, caller: Caller, job_id: str, body: JobUpdate
) -> JobValidation:
    """A whole new definition of the job checked as :func:`replace_job` would, writing nothing."""
    stored = await job_for(services, caller, job_id, Scope.WRITE)
    record = body.to_record(job_id)
    check_settable(caller, record, stored, services)
    checked = await services.job_service.check_edit(record)
    return JobValidation.from_record(checked, services.clock.now())


async def list_jobs(
    services: ApiServices,
    caller: Caller,
    *,
    team: str | None = None,
    name: str | None = None,
    labels: Sequence[str] = (),
    paused: bool | None = None,
    last_state: RunState | None = None,
    late: bool = False,
    include: Sequence[Include] = (),
    limit: int = 100,
    cursor: str | None = None,
) -> JobPage:
    caller.require(Scope.READ)
    now = services.clock.now()
    query = JobQuery(
        team=team,
        teams=caller_teams(caller),
        name=name,
        labels=label_pairs(labels),
        paused=paused,
        last_state=last_state,
        late_before=late_before(now) if late else None,
        limit=limit,
        cursor=cursor,
    )
    page = await paged(services.store.list_jobs(query))
    ids = [job.id for job in page.items]
    last = await services.store.last_runs(ids) if ids else {}
    recent = await services.store.recent_runs(ids, RECENT_RUNS) if ids and "recent" in include else None
    return JobPage(
        items=[
            JobOut.from_record(
                shown(caller, job),
                last.get(job.id),
                now=now,
                recent=None if recent is None else recent.get(job.id, []),
            )
            for job in page.items
        ],
        next_cursor=page.next_cursor,
    )


async def get_job(services: ApiServices, caller: Caller, job_id: str) -> JobOut:
    return await summary(services, shown(caller, await job_for(services, caller, job_id, Scope.READ)))


async def replace_job(
    services: ApiServices, caller: Caller, actor: Actor, job_id: str, body: JobUpdate, expected: int | None
) -> JobOut:
    stored = await check_version(services, caller, job_id, expected)
    record = body.to_record(job_id)
    check_settable(caller, record, stored, services)
    job = await conditional(services, job_id, expected, services.job_service.update(record, expected, actor))
    return await summary(services, job)


async def patch_job(
    services: ApiServices, caller: Caller, actor: Actor, job_id: str, body: JobPatch, expected: int | None
) -> JobOut:
    """Merge ``body`` into the stored definition and write it; merged again when someone else
    edited the job between the read and the write (unless a version was expected)."""
    for _ in range(PATCH_ROUNDS):
        current = await check_version(services, caller, job_id, expected)
        update = job_update_from_json(body.apply_to(current))  # ValidationError: 422 by field
        record = update.to_record(job_id)
        check_settable(caller, record, current, services)
        version = current.version if expected is None else expected
        try:
            write = services.job_service.update(record, version, actor)
            job = await conditional(services, job_id, version, write)
        except VersionConflictError:
            if expected is not None:
                raise
            continue
        return await summary(services, job)
    raise ConflictError(f"job {job_id} kept changing during the patch; try again")


async def delete_job(
    services: ApiServices, caller: Caller, actor: Actor, job_id: str, expected: int | None
) -> None:
    job = await check_version(services, caller, job_id, expected)
    await services.job_service.delete(job_id, actor, job.team)


async def pause_job(
    services: ApiServices, caller: Caller, actor: Actor, job_id: str, note: str | None, expected: int | None
) -> JobOut:
    await check_version(services, caller, job_id, expected)
    pause = services.job_service.pause(job_id, note, expected, actor)
    return await summary(services, await conditional(services, job_id, expected, pause))


async def resume_job(
    services: ApiServices,
    caller: Caller,
    actor: Actor,
    job_id: str,
    missed: Literal["skip", "misfire"],
    expected: int | None,
) -> JobOut:
    await check_version(services, caller, job_id, expected)
    resume = services.job_service.resume(job_id, missed, expected, actor)
    return await summary(services, await conditional(services, job_id, expected, resume))


async def trigger_job(
    services: ApiServices,
    caller: Caller,
    actor: Actor,
    job_id: str,
    payload: Any,
    has_payload: bool,
    idempotency_key: str | None,
    *,
    traceparent: str | None = None,
    tracestate: str | None = None,
) -> tuple[RunOut, bool]:
    """Run the job now, once: the run, and whether this call created it (False: the run an
    earlier call with ``idempotency_key`` created)."""
    await job_for(services, caller, job_id, Scope.TRIGGER)
    run, created = await services.job_service.trigger(
        job_id, payload, has_payload, idempotency_key, actor, traceparent=traceparent, tracestate=tracestate
    )
    run = await services.store.get_run(run.id)  # as queued (the service marks it after publishing)
    return (await runs_out(services, [run]))[0], created


# -- runs -------------------------------------------------------------------------------------------


async def list_job_runs(
    services: ApiServices,
    caller: Caller,
    job_id: str,
    states: Sequence[RunState] = (),
    limit: int = 100,
    cursor: str | None = None,
) -> RunPage:
    """The job's runs, newest first (also those of a deleted job)."""
    team = await services.store.job_team(job_id)  # a deleted job's too: its runs stay readable
    if team is None:
        raise NotFoundError(f"job {job_id} not found")  # only for a job that never existed
    caller.require(Scope.READ, team, what=f"job {job_id}")
    query = RunQuery(job_id=job_id, states=tuple(states), limit=limit, cursor=cursor)
    page = await paged(services.store.list_runs(query))
    return RunPage(items=await runs_out(services, page.items), next_cursor=page.next_cursor)


async def list_runs(
    services: ApiServices,
    caller: Caller,
    job_id: str | None = None,
    states: Sequence[RunState] = (),
    limit: int = 100,
    cursor: str | None = None,
    *,
    team: str | None = None,
    reasons: Sequence[SkipReason] = (),
    since: datetime | None = None,
    until: datetime | None = None,
    late: bool = False,
) -> RunPage:
    """Runs of every job of the caller's teams (or of one job), newest first; ``since`` and
    ``until`` bound the slot, ``late`` keeps runs that started over
    :data:`cronwheel.lateness.LATE_START` late."""
    caller.require(Scope.READ)
    if since is not None and until is not None and until <= since:
        message = "must be after since"
        raise ProblemError(
            422, "validation", "Invalid request", f"until: {message}",
            errors=[field_error("until", message, "query", code="range_order")],
        )  # fmt: skip
    query = RunQuery(
        job_id=job_id,
        teams=caller_teams(caller),
        states=tuple(states),
        team=team,
        reasons=tuple(reason.value for reason in reasons),
        since=since,
        until=until,
        late=late,
        limit=limit,
        cursor=cursor,
    )
    page = await paged(services.store.list_runs(query))
    return RunPage(items=await runs_out(services, page.items), next_cursor=page.next_cursor)


async def get_run(services: ApiServices, caller: Caller, run_id: str) -> RunDetailOut:
    run, team = await services.store.get_run_with_team(run_id)
    caller.require(Scope.READ, team, what=f"run {run_id}")
    attempts = await services.store.list_attempts(run_id)
    events = await services.store.list_events(run_id)
    jobs = await services.store.get_jobs([run.job_id])
    return RunDetailOut.from_records(run, jobs.get(run.job_id), attempts, events)


# -- schedules and the cluster ----------------------------------------------------------------------


async def preview_schedule(services: ApiServices, caller: Caller, body: PreviewIn) -> PreviewOut:
    """The preview; with calendars, those of ``team`` (which the caller must see) mark its fires."""
    caller.require(Scope.READ)
    calendar = None
    if body.calendars:
        if body.team is None:
            message = "calendars are a team's: give team"
            raise ProblemError(
                422,
                "validation",
                "Invalid request",
                f"team: {message}",
                errors=[field_error("team", message, code="team_required")],
            )
        caller.require(Scope.READ, body.team, what=f"team {body.team!r}")
        calendar = await resolve_calendars(services.store, body.team, body.calendars)
    try:
        return PreviewOut.build(body, services.clock.now(), calendar)
    except ScheduleError as error:
        raise ProblemError(
            422, "invalid-schedule", "Invalid schedule", schedule_sentence(error),
            errors=_schedule_errors(error, "expression"),
        ) from None  # fmt: skip


async def upcoming_fires(services: ApiServices, caller: Caller, window_s: int, bucket_s: int) -> UpcomingOut:
    """How many jobs of the caller's teams fire in each bucket of the coming window, by team
    (live, unpaused, not complete jobs; :mod:`cronwheel.scheduler.upcoming` says what counts):
    one count shared for a few seconds by the callers asking the same window, buckets and teams."""
    caller.require(Scope.READ)
    teams = caller_teams(caller)
    return await services.upcoming.get(
        (window_s, bucket_s, teams), lambda: _count_upcoming(services, teams, window_s, bucket_s)
    )


async def _count_upcoming(
    services: ApiServices, teams: Sequence[str] | None, window_s: int, bucket_s: int
) -> UpcomingOut:
    now = services.clock.now()
    bucket = timedelta(seconds=bucket_s)
    window = upcoming.Window(upcoming.aligned(now, bucket), timedelta(seconds=window_s), bucket)
    groups = await services.store.fire_groups(teams)  # grouped in the store, the team walls in its query
    # CPU only (a few walks per distinct schedule): in a thread, so the loop serves others meanwhile
    return UpcomingOut.of(await asyncio.to_thread(upcoming.count, groups, window), window, now)


async def cluster_status(services: ApiServices, caller: Caller) -> dict[str, Any]:
    _cluster_served(services, caller)
    assert services.cluster is not None
    return await services.cluster.snapshot()


def _cluster_served(services: ApiServices, caller: Caller) -> None:
    require_every_team(caller, Scope.ADMIN, "cluster status")
    if services.cluster is None:
        raise ProblemError(404, "not-found", "Not found", "cluster status is not served by this process")


# -- live events ------------------------------------------------------------------------------------


async def check_follow(services: ApiServices, caller: Caller, topics: Topics) -> None:
    """Refuse a stream of ``topics`` that ``caller`` could not read: each topic as the read of
    what it follows (``read`` scope; a job or run of another team, or none, a 404; ``cluster``
    as ``GET /v1/cluster``)."""
    caller.require(Scope.READ)
    for job_id in sorted(topics.job_ids):
        await job_for(services, caller, job_id, Scope.READ)
    for run_id in sorted(topics.run_ids):
        _, team = await services.store.get_run_with_team(run_id)
        caller.require(Scope.READ, team, what=f"run {run_id}")
    if topics.cluster:
        _cluster_served(services, caller)


# -- backfills --------------------------------------------------------------------------------------


async def backfill_job(
    services: ApiServices, caller: Caller, actor: Actor, job_id: str, body: BackfillIn
) -> BackfillOut | BackfillPlanOut:
    """Accept a backfill of the job's past slots (the ``trigger`` scope: it runs the job), or with
    ``dry_run`` answer what it would do, writing nothing."""
    await job_for(services, caller, job_id, Scope.TRIGGER)
    service = services.job_service
    if body.dry_run:
        return BackfillPlanOut.from_plan(await service.plan_backfill(job_id, body.start, body.end))
    backfill = await service.backfill(job_id, body.start, body.end, body.confirm, actor)
    return BackfillOut.from_record(backfill)


async def get_backfill(services: ApiServices, caller: Caller, job_id: str, backfill_id: str) -> BackfillOut:
    """One backfill of the job and its progress (404 for one of another job)."""
    await job_for(services, caller, job_id, Scope.READ)
    backfill = await services.store.get_backfill(backfill_id)
    if backfill.job_id != job_id:
        raise NotFoundError(f"job {job_id} has no backfill {backfill_id}")
    return BackfillOut.from_record(backfill)


async def cancel_backfill(
    services: ApiServices, caller: Caller, actor: Actor, job_id: str, backfill_id: str
) -> BackfillOut:
    """Stop a running backfill of the job (the ``trigger`` scope, as starting one); one that has
    ended is refused (409 ``not-running``)."""
    await job_for(services, caller, job_id, Scope.TRIGGER)
    return BackfillOut.from_record(await services.job_service.cancel_backfill(job_id, backfill_id, actor))


async def job_backfills(services: ApiServices, caller: Caller, job_id: str, limit: int) -> BackfillPage:
    """The job's backfills and their progress, newest first."""
    await job_for(services, caller, job_id, Scope.READ)
    found = await services.store.job_backfills(job_id, limit)
    return BackfillPage(items=[BackfillOut.from_record(backfill) for backfill in found])

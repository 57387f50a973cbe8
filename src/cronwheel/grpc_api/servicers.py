"""The ``cronwheel.v1`` services: each method translates, nothing more.

A method opens a :class:`~cronwheel.grpc_api.calls.Call` (rate limit, authentication, the audit of
refusals, errors), resolves a job address (an id, or ``team/name``, as REST's two paths), turns its
request into the REST API's pydantic model (:mod:`cronwheel.grpc_api.convert`), calls the one
function of :mod:`cronwheel.api.operations` (or of :mod:`cronwheel.api.routes.tokens`,
:mod:`cronwheel.api.routes.secrets`) that REST's route calls, and turns the model it returns into the
answer. The query parameters of list methods are checked by :class:`_Listing` models of the types
REST declares its query parameters with (:mod:`cronwheel.api.schemas.queries`, under the same names).
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from google.protobuf import empty_pb2, struct_pb2
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from cronwheel.api import operations
from cronwheel.api.addressing import job_id_by_name
from cronwheel.api.problems import ProblemError, field_error
from cronwheel.api.routes import calendars as calendar_ops
from cronwheel.api.routes import secrets as secret_ops
from cronwheel.api.routes import tokens as token_ops
from cronwheel.api.routes.backfills import BACKFILLS_LISTED
from cronwheel.api.routes.calendars import CalendarBody, CalendarIn
from cronwheel.api.routes.secrets import SecretIn
from cronwheel.api.routes.tokens import TokenCreate
from cronwheel.api.schemas.backfills import BackfillIn, BackfillPlanOut
from cronwheel.api.schemas.base import NAME_PATTERN, Instant, Name, RunStateName
from cronwheel.api.schemas.jobs import JobCreate, JobPatch, JobUpdate, PauseIn, ResumeIn, TriggerIn
from cronwheel.api.schemas.preview import PreviewIn
from cronwheel.api.schemas.queries import (
    DEFAULT_LIMIT,
    CursorText,
    Includes,
    LabelFilters,
    PageLimit,
    Reasons,
    Short,
    States,
)
from cronwheel.api.services import ApiServices
from cronwheel.grpc_api.calls import Call
from cronwheel.grpc_api.convert import message, spec_json, to_dict, validated
from cronwheel.grpc_api.masks import patch_body
from cronwheel.model import RunState
from cronwheel.v1 import (
    calendars_pb2,
    calendars_pb2_grpc,
    cluster_pb2,
    cluster_pb2_grpc,
    jobs_pb2,
    jobs_pb2_grpc,
    runs_pb2,
    runs_pb2_grpc,
    schedules_pb2,
    schedules_pb2_grpc,
    secrets_pb2,
    secrets_pb2_grpc,
    tokens_pb2,
    tokens_pb2_grpc,
)


class _Listing(BaseModel):
    """The paging parameters of every list (REST's ``limit`` and ``cursor`` query parameters)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    limit: PageLimit = DEFAULT_LIMIT
    cursor: CursorText | None = None


class _JobListing(_Listing):
    team: Short | None = None
    name: Short | None = None
    label: LabelFilters = Field(default_factory=list)
    paused: bool | None = None
    last_state: RunStateName | None = None
    late: bool = False
    include: Includes = Field(default_factory=list)


class _JobRunListing(_Listing):
    state: States = Field(default_factory=list)


class _RunListing(_JobRunListing):
    job_id: Short | None = None
    team: Short | None = None
    reason: Reasons = Field(default_factory=list)
    since: Instant | None = None
    until: Instant | None = None
    late: bool = False


class _TokenListing(_Listing):
    team: Short | None = None
    include_revoked: bool = False


async def _job_id(services: ApiServices, call: Call, address: str) -> str:
    """The id of the job ``address`` names: its id, or ``team/name`` (its team's live job of that
    name), resolved by the function REST's ``/v1/teams/{team}/jobs/{name}`` routes use (a team
    the caller is not of answers as a name no job has). Ids never hold a ``/``."""
    if "/" not in address:
        return address
    team, _, name = address.partition("/")
    if not (re.fullmatch(NAME_PATTERN, team) and re.fullmatch(NAME_PATTERN, name)):
        message = "a job id, or team/name (letters, digits, '.', '_', '-'; at most 100 each)"
        raise ProblemError(
            422, "validation", "Invalid request", f"job_id: {message}",
            errors=[field_error("job_id", message, code="invalid_address")],
        )  # fmt: skip
    return await job_id_by_name(team, name, services, call.caller)


def _state(name: str | None) -> RunState | None:
    return None if name is None else RunState(name)


def _expected(request: Any) -> int | None:
    """REST's ``If-Match``: the ``expected_version`` a write names, if any."""
    return request.expected_version if request.HasField("expected_version") else None


class _Servicer:
    def __init__(self, services: ApiServices) -> None:
        self.services = services

    def call(self, context: Any) -> Call:
        return Call(self.services, context)

    async def job_id(self, call: Call, address: str) -> str:
        return await _job_id(self.services, call, address)


class JobServicer(_Servicer, jobs_pb2_grpc.JobServiceServicer):
    def _spec(self, model: type[JobCreate] | type[JobUpdate], spec: jobs_pb2.JobSpec) -> Any:
        operations.bind_checks(self.services)  # in this task, before the body is validated
        return validated(model, spec_json(to_dict(spec)))

    async def CreateJob(self, request: jobs_pb2.CreateJobRequest, context: Any) -> jobs_pb2.Job:
        async with self.call(context) as call:
            body = self._spec(JobCreate, request.job)
            job = await operations.create_job(self.services, call.caller, call.actor, body)
            return message(job, jobs_pb2.Job())

    async def ValidateJob(self, request: jobs_pb2.ValidateJobRequest, context: Any) -> jobs_pb2.JobValidation:
        async with self.call(context) as call:
            if request.HasField("job_id"):
                edit = self._spec(JobUpdate, request.job)
                checked = await operations.validate_job_edit(
                    self.services, call.caller, await self.job_id(call, request.job_id), edit
                )
            else:
                new = self._spec(JobCreate, request.job)
                checked = await operations.validate_job(self.services, call.caller, new)
            return message(checked, jobs_pb2.JobValidation())

    async def ListJobs(self, request: jobs_pb2.ListJobsRequest, context: Any) -> jobs_pb2.JobPage:
        async with self.call(context) as call:
            query = validated(_JobListing, to_dict(request))
            page = await operations.list_jobs(
                self.services, call.caller, team=query.team, name=query.name, labels=query.label,
                paused=query.paused, last_state=_state(query.last_state), late=query.late,
                include=query.include, limit=query.limit, cursor=query.cursor,
            )  # fmt: skip
            return message(page, jobs_pb2.JobPage())

    async def GetJob(self, request: jobs_pb2.GetJobRequest, context: Any) -> jobs_pb2.Job:
        async with self.call(context) as call:
            job_id = await self.job_id(call, request.job_id)
            job = await operations.get_job(self.services, call.caller, job_id)
            return message(job, jobs_pb2.Job())

    async def ReplaceJob(self, request: jobs_pb2.ReplaceJobRequest, context: Any) -> jobs_pb2.Job:
        async with self.call(context) as call:
            job_id = await self.job_id(call, request.job_id)
            body = self._spec(JobUpdate, request.job)
            job = await operations.replace_job(
                self.services, call.caller, call.actor, job_id, body, _expected(request)
            )
            return message(job, jobs_pb2.Job())

    async def PatchJob(self, request: jobs_pb2.PatchJobRequest, context: Any) -> jobs_pb2.Job:
        async with self.call(context) as call:
            job_id = await self.job_id(call, request.job_id)
            operations.bind_checks(self.services)
            body = validated(JobPatch, patch_body(request.job, request.update_mask))
            job = await operations.patch_job(
                self.services, call.caller, call.actor, job_id, body, _expected(request)
            )
            return message(job, jobs_pb2.Job())

    async def DeleteJob(self, request: jobs_pb2.DeleteJobRequest, context: Any) -> empty_pb2.Empty:
        async with self.call(context) as call:
            job_id = await self.job_id(call, request.job_id)
            await operations.delete_job(self.services, call.caller, call.actor, job_id, _expected(request))
            return empty_pb2.Empty()

    async def PauseJob(self, request: jobs_pb2.PauseJobRequest, context: Any) -> jobs_pb2.Job:
        async with self.call(context) as call:
            job_id = await self.job_id(call, request.job_id)
            note = validated(PauseIn, {"note": request.note} if request.HasField("note") else {}).note
            job = await operations.pause_job(
                self.services, call.caller, call.actor, job_id, note, _expected(request)
            )
            return message(job, jobs_pb2.Job())

    async def ResumeJob(self, request: jobs_pb2.ResumeJobRequest, context: Any) -> jobs_pb2.Job:
        async with self.call(context) as call:
            job_id = await self.job_id(call, request.job_id)
            given = {"missed": request.missed} if request.HasField("missed") else {}
            missed = validated(ResumeIn, given).missed
            job = await operations.resume_job(
                self.services, call.caller, call.actor, job_id, missed, _expected(request)
            )
            return message(job, jobs_pb2.Job())

    async def TriggerJob(
        self, request: jobs_pb2.TriggerJobRequest, context: Any
    ) -> jobs_pb2.TriggerJobResponse:
        async with self.call(context) as call:
            job_id = await self.job_id(call, request.job_id)
            given = to_dict(request)
            has_payload = request.HasField("payload")
            body = validated(TriggerIn, {"payload": given.get("payload")})
            key = validated(_Idempotency, given)
            run, created = await operations.trigger_job(
                self.services, call.caller, call.actor, job_id, body.payload, has_payload,
                key.idempotency_key, traceparent=key.traceparent, tracestate=key.tracestate,
            )  # fmt: skip
            return message(
                {"run": run.model_dump(mode="json"), "created": created}, jobs_pb2.TriggerJobResponse()
            )

    async def BackfillJob(
        self, request: jobs_pb2.BackfillJobRequest, context: Any
    ) -> jobs_pb2.BackfillJobResponse:
        async with self.call(context) as call:
            job_id = await self.job_id(call, request.job_id)
            body = validated(BackfillIn, _backfill_body(request))
            answer = await operations.backfill_job(self.services, call.caller, call.actor, job_id, body)
            if isinstance(answer, BackfillPlanOut):
                return jobs_pb2.BackfillJobResponse(plan=message(answer, jobs_pb2.BackfillPlan()))
            return jobs_pb2.BackfillJobResponse(backfill=message(answer, jobs_pb2.Backfill()))

    async def ListBackfills(
        self, request: jobs_pb2.ListBackfillsRequest, context: Any
    ) -> jobs_pb2.BackfillList:
        async with self.call(context) as call:
            job_id = await self.job_id(call, request.job_id)
            given = {"limit": request.limit} if request.HasField("limit") else {}
            limit = validated(_BackfillListing, given).limit
            page = await operations.job_backfills(self.services, call.caller, job_id, limit)
            return message(page, jobs_pb2.BackfillList())

    async def GetBackfill(self, request: jobs_pb2.GetBackfillRequest, context: Any) -> jobs_pb2.Backfill:
        async with self.call(context) as call:
            job_id = await self.job_id(call, request.job_id)
            backfill = await operations.get_backfill(self.services, call.caller, job_id, request.backfill_id)
            return message(backfill, jobs_pb2.Backfill())

    async def CancelBackfill(
        self, request: jobs_pb2.CancelBackfillRequest, context: Any
    ) -> jobs_pb2.Backfill:
        async with self.call(context) as call:
            job_id = await self.job_id(call, request.job_id)
            backfill = await operations.cancel_backfill(
                self.services, call.caller, call.actor, job_id, request.backfill_id
            )
            return message(backfill, jobs_pb2.Backfill())


class _BackfillListing(BaseModel):
    limit: Annotated[int, Field(ge=1, le=100)] = BACKFILLS_LISTED


def _backfill_body(request: jobs_pb2.BackfillJobRequest) -> dict[str, Any]:
    """REST's backfill body: ``start`` and ``end`` under REST's names (empty: missing, as REST's)."""
    given = {"from": request.start, "to": request.end, "dry_run": request.dry_run, "confirm": request.confirm}
    return {key: value for key, value in given.items() if value != ""}


class _Fields(BaseModel):
    """Of a request message, the fields a model checks; the others (job ids ...) pass."""

    model_config = ConfigDict(extra="ignore", strict=True)


class _Owner(_Fields):
    """A secret's team and name (REST's path parameters, with their pattern)."""

    team: Name
    name: Name | None = None


class _Idempotency(_Fields):
    idempotency_key: Annotated[str, StringConstraints(min_length=1, max_length=200)] | None = None
    traceparent: str | None = None
    tracestate: str | None = None


def _owner(request: Any) -> None:
    validated(_Owner, {"team": request.team, "name": request.name})


class RunServicer(_Servicer, runs_pb2_grpc.RunServiceServicer):
    async def ListRuns(self, request: runs_pb2.ListRunsRequest, context: Any) -> runs_pb2.RunPage:
        async with self.call(context) as call:
            query = validated(_RunListing, to_dict(request))
            states = tuple(RunState(state) for state in query.state)
            page = await operations.list_runs(
                self.services, call.caller, query.job_id, states, query.limit, query.cursor,
                team=query.team, reasons=query.reason, since=query.since, until=query.until,
                late=query.late,
            )  # fmt: skip
            return message(page, runs_pb2.RunPage())

    async def ListJobRuns(self, request: runs_pb2.ListJobRunsRequest, context: Any) -> runs_pb2.RunPage:
        async with self.call(context) as call:
            job_id = await self.job_id(call, request.job_id)
            given = to_dict(request)
            given.pop("job_id", None)
            query = validated(_JobRunListing, given)
            states = tuple(RunState(state) for state in query.state)
            page = await operations.list_job_runs(
                self.services,
                call.caller,
                job_id,
                states,
                query.limit,
                query.cursor,
            )
            return message(page, runs_pb2.RunPage())

    async def GetRun(self, request: runs_pb2.GetRunRequest, context: Any) -> runs_pb2.RunDetail:
        async with self.call(context) as call:
            run = await operations.get_run(self.services, call.caller, request.run_id)
            return message(run, runs_pb2.RunDetail())


class ScheduleServicer(_Servicer, schedules_pb2_grpc.ScheduleServiceServicer):
    async def PreviewSchedule(
        self, request: schedules_pb2.PreviewScheduleRequest, context: Any
    ) -> schedules_pb2.SchedulePreview:
        async with self.call(context) as call:
            body = validated(PreviewIn, to_dict(request))
            preview = await operations.preview_schedule(self.services, call.caller, body)
            return message(preview, schedules_pb2.SchedulePreview())


class ClusterServicer(_Servicer, cluster_pb2_grpc.ClusterServiceServicer):
    async def GetClusterStatus(
        self, request: cluster_pb2.GetClusterStatusRequest, context: Any
    ) -> cluster_pb2.ClusterStatus:
        async with self.call(context) as call:
            snapshot = await operations.cluster_status(self.services, call.caller)
            status = message(snapshot, struct_pb2.Struct())
            return cluster_pb2.ClusterStatus(status=status)


class TokenServicer(_Servicer, tokens_pb2_grpc.TokenServiceServicer):
    async def CreateToken(
        self, request: tokens_pb2.CreateTokenRequest, context: Any
    ) -> tokens_pb2.CreatedToken:
        async with self.call(context) as call:
            body = validated(TokenCreate, to_dict(request))
            made = await token_ops.create(self.services, call.caller, call.actor, body)
            return message(made, tokens_pb2.CreatedToken())

    async def ListTokens(self, request: tokens_pb2.ListTokensRequest, context: Any) -> tokens_pb2.TokenPage:
        async with self.call(context) as call:
            query = validated(_TokenListing, to_dict(request))
            page = await token_ops.list_page(
                self.services, call.caller, query.team, query.include_revoked, query.limit, query.cursor
            )
            return message(page, tokens_pb2.TokenPage())

    async def GetToken(self, request: tokens_pb2.GetTokenRequest, context: Any) -> tokens_pb2.Token:
        async with self.call(context) as call:
            token = await token_ops.get(self.services, call.caller, request.token_id)
            return message(token, tokens_pb2.Token())

    async def RevokeToken(self, request: tokens_pb2.RevokeTokenRequest, context: Any) -> empty_pb2.Empty:
        async with self.call(context) as call:
            await token_ops.revoke(self.services, call.caller, call.actor, request.token_id)
            return empty_pb2.Empty()


class SecretServicer(_Servicer, secrets_pb2_grpc.SecretServiceServicer):
    async def ListSecrets(
        self, request: secrets_pb2.ListSecretsRequest, context: Any
    ) -> secrets_pb2.SecretPage:
        async with self.call(context) as call:
            given = to_dict(request)
            validated(_Owner, {"team": given.pop("team", "")})
            query = validated(_Listing, given)
            store = secret_ops.secrets_of(self.services)
            page = await secret_ops.list_page(store, call.caller, request.team, query.limit, query.cursor)
            return message(page, secrets_pb2.SecretPage())

    async def GetSecret(self, request: secrets_pb2.GetSecretRequest, context: Any) -> secrets_pb2.Secret:
        async with self.call(context) as call:
            _owner(request)
            store = secret_ops.secrets_of(self.services)
            secret = await secret_ops.get(store, call.caller, request.team, request.name)
            return message(secret, secrets_pb2.Secret())

    async def SetSecret(
        self, request: secrets_pb2.SetSecretRequest, context: Any
    ) -> secrets_pb2.SetSecretResponse:
        async with self.call(context) as call:
            _owner(request)
            body = validated(SecretIn, {"value": request.value} if request.value else {})
            store = secret_ops.secrets_of(self.services)
            stored, created = await secret_ops.put(
                store, call.caller, call.actor, request.team, request.name, body
            )
            answer = {"secret": stored.model_dump(mode="json"), "created": created}
            return message(answer, secrets_pb2.SetSecretResponse())

    async def DeleteSecret(self, request: secrets_pb2.DeleteSecretRequest, context: Any) -> empty_pb2.Empty:
        async with self.call(context) as call:
            _owner(request)
            store = secret_ops.secrets_of(self.services)
            await secret_ops.delete(store, call.caller, call.actor, request.team, request.name)
            return empty_pb2.Empty()

    async def ReencryptSecrets(
        self, request: secrets_pb2.ReencryptSecretsRequest, context: Any
    ) -> secrets_pb2.ReencryptResult:
        async with self.call(context) as call:
            store = secret_ops.secrets_of(self.services)
            done = await secret_ops.reencrypt(store, call.caller, call.actor)
            return message(done, secrets_pb2.ReencryptResult())


class CalendarServicer(_Servicer, calendars_pb2_grpc.CalendarServiceServicer):
    async def ListCalendars(
        self, request: calendars_pb2.ListCalendarsRequest, context: Any
    ) -> calendars_pb2.CalendarPage:
        async with self.call(context) as call:
            given = to_dict(request)
            validated(_Owner, {"team": given.pop("team", "")})
            query = validated(_Listing, given)
            service = self.services.calendars
            page = await calendar_ops.list_page(service, call.caller, request.team, query.limit, query.cursor)
            return message(page, calendars_pb2.CalendarPage())

    async def GetCalendar(
        self, request: calendars_pb2.GetCalendarRequest, context: Any
    ) -> calendars_pb2.Calendar:
        async with self.call(context) as call:
            _owner(request)
            found = await calendar_ops.get(self.services.calendars, call.caller, request.team, request.name)
            return message(found, calendars_pb2.Calendar())

    async def CreateCalendar(
        self, request: calendars_pb2.CreateCalendarRequest, context: Any
    ) -> calendars_pb2.Calendar:
        async with self.call(context) as call:
            _owner(request)
            body = validated(CalendarIn, {**to_dict(request.calendar), "name": request.name})
            created = await calendar_ops.create(
                self.services.calendars, call.caller, call.actor, request.team, body
            )
            return message(created, calendars_pb2.Calendar())

    async def ReplaceCalendar(
        self, request: calendars_pb2.ReplaceCalendarRequest, context: Any
    ) -> calendars_pb2.Calendar:
        async with self.call(context) as call:
            _owner(request)
            body = validated(CalendarBody, to_dict(request.calendar))
            replaced = await calendar_ops.replace(
                self.services.calendars, call.caller, call.actor, request.team, request.name, body
            )
            return message(replaced, calendars_pb2.Calendar())

    async def DeleteCalendar(
        self, request: calendars_pb2.DeleteCalendarRequest, context: Any
    ) -> empty_pb2.Empty:
        async with self.call(context) as call:
            _owner(request)
            await calendar_ops.delete(
                self.services.calendars, call.caller, call.actor, request.team, request.name
            )
            return empty_pb2.Empty()

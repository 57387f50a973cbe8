"""The REST API's request and response bodies (pydantic v2), and their converters to and from the
records of :mod:`cronwheel.model`.

Pydantic lives here and nowhere else: routes validate a body into one of these models, call
``to_record`` to get a :class:`~cronwheel.model.Job`, and answer with ``from_record``. Every model
refuses unknown fields and does not coerce types (``"30"`` is not a number), so a typo is a 422
that names the field rather than a setting silently ignored.

A job's fields are defined once, in :class:`JobFields` (types, constraints, defaults, docs):
:class:`JobSpec` (POST and PUT) adds the checks a schema cannot state, :class:`JobOut` adds the
server's read-only fields, :class:`JobPatch` is derived from :class:`JobSpec` with every field
optional, and :func:`spec_fields` follows :class:`JobSpec`'s field list. Every choice (overlap,
misfire policy, run state ...) is the model's own enum or ``Literal`` alias, never a copy.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    Field,
    ModelWrapValidatorHandler,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from cronwheel.api.schemas import checks
from cronwheel.api.schemas.base import (
    NO_OTHER_KEYS,
    CalendarShiftChoice,
    Instant,
    LabelKey,
    LabelValue,
    Name,
    OutModel,
    OverlapChoice,
    RunStateName,
    ScheduleText,
    StrictModel,
    ZoneName,
)
from cronwheel.api.schemas.partial import partial_model
from cronwheel.api.schemas.policies import MisfireSpec, RetentionSpec, RetrySpec
from cronwheel.api.schemas.preview import FireOut, fires_of, jitter_warnings
from cronwheel.api.schemas.targets import TargetSpec, target_from_record
from cronwheel.errors import InvalidInputError
from cronwheel.jobs.service import MAX_JOB_CALENDARS, MAX_TIMEOUT_S, check_payload
from cronwheel.lateness import is_late
from cronwheel.model import (
    CalendarShift,
    Job,
    Overlap,
    Run,
    utc_text,
)
from cronwheel.schedule import DstFold, DstGap, ScheduleError, describe, parse_schedule
from cronwheel.schedule.jitter import MAX_JITTER_S, fire_at
from cronwheel.schedule.lint import schedule_warnings
from cronwheel.store.port import RunSample
from cronwheel.targets.kinds import plain_values

# -- jobs --------------------------------------------------------------------------------------


def _json_payload(value: Any, info: ValidationInfo) -> Any:
    if not (info.context or {}).get("stored"):  # a stored payload was checked when it was written
        try:
            check_payload(value)
        except InvalidInputError as error:  # from JSON, only its size can be refused
            raise PydanticCustomError("payload_invalid", "{reason}", {"reason": str(error)}) from None
    return value


Payload = Annotated[Any, AfterValidator(_json_payload)]


class JobFields(StrictModel):
    """Everything a client defines about a job: each field's type, constraints, default and
    documentation, written once for requests and responses alike."""

    team: Name = Field(description="The owning team.")
    name: Name = Field(description="Unique among the team's live jobs (else 409).")
    schedule: ScheduleText = Field(
        description="A cron expression (docs/schedules.md); `H` hashes the job id."
    )
    timezone: ZoneName = Field(default="UTC", description="The IANA zone the schedule is evaluated in.")
    dst_gap: DstGap | None = Field(
        default=None, description="Local times a DST change skips; null: the schedule kind's default."
    )
    dst_fold: DstFold | None = Field(
        default=None, description="Local times a DST change repeats; null: the schedule kind's default."
    )
    target: TargetSpec = Field(description="What each attempt calls, tagged by `type`.")
    description: Annotated[str, StringConstraints(max_length=2000)] = ""
    payload: Payload = Field(default=None, description="Any JSON, at most 64 KiB as compact JSON.")
    timeout_s: float = Field(default=60.0, gt=0, le=MAX_TIMEOUT_S, description="Per attempt, in seconds.")
    retry: RetrySpec = RetrySpec()
    misfire: MisfireSpec = MisfireSpec()
    overlap: OverlapChoice = Field(
        default=Overlap.ALLOW, description="When a slot comes while an earlier run is still active."
    )
    jitter_s: float = Field(
        default=0.0,
        ge=0,
        le=MAX_JITTER_S,
        description="Each slot fires up to this many seconds after it, at an offset fixed by the job id "
        "and the slot (docs/schedules.md, Jitter); shorter than the schedule's shortest gap between "
        "two slots. 0: at the slot.",
    )
    start_at: Instant | None = Field(default=None, description="No slot before this instant.")
    end_at: Instant | None = Field(default=None, description="No slot after this instant; after start_at.")
    queue: Name = Field(default="default", description="A queue the server's workers serve.")
    labels: Annotated[dict[LabelKey, LabelValue], NO_OTHER_KEYS] = Field(default_factory=dict, max_length=64)
    retention: RetentionSpec | None = Field(
        default=None, description="How much run history to keep; null: the server's default."
    )
    delete_after_success: bool = Field(
        default=False,
        description="One-time (`@at`) jobs only: the success of its run deletes the job, in the "
        "transaction that records it (a failed or skipped run leaves it). Else 422 not-one-time.",
    )
    calendars: list[Name] = Field(
        default_factory=list,
        max_length=MAX_JOB_CALENDARS,
        description="Calendars of the job's team (by name) whose closed days it skips: a slot whose local "
        "date is closed is recorded SKIPPED, reason `calendar`.",
    )
    calendar_shift: CalendarShiftChoice = Field(
        default=CalendarShift.NONE,
        description="Where a skipped slot's run goes: `none`; `next` or `previous`: the same local time "
        "on the nearest open day (31 days at most). Only for schedules firing at most once a day.",
    )

    @field_validator("end_at")
    @classmethod
    def _window(cls, value: datetime | None, info: ValidationInfo) -> datetime | None:
        start = info.data.get("start_at")
        if value is not None and start is not None and value <= start:
            raise PydanticCustomError("field_order", "end_at must be after start_at")
        return value


class JobSpec(JobFields):
    """A job's whole definition (the body of POST and PUT), checked in one round: the schema, then
    on the fields it accepted the schedule and zone, the server's target policy and queues, all
    reported together (see :mod:`cronwheel.api.schemas.checks`)."""

    _new_job: ClassVar[bool] = False  # JobCreate: also refuse a job that would never fire

    @model_validator(mode="wrap")
    @classmethod
    def _one_round(cls, data: Any, handler: ModelWrapValidatorHandler[JobSpec]) -> JobSpec:
        spec, errors, values = _validate_fields(data, handler, complete=True)
        problems = checks.definition_problems(values, complete=True, new_job=cls._new_job)
        if errors or problems:
            raise ValidationError.from_exception_data(cls.__name__, errors + checks.line_errors(problems))
        assert isinstance(spec, JobSpec)
        return spec

    def to_record(self, job_id: str = "") -> Job:
        """The job record (``id`` empty for a new job: the service assigns one)."""
        return Job(
            id=job_id,
            **{name: getattr(self, name) for name in _PLAIN_FIELDS},
            target=self.target.to_record(),
            retry=self.retry.to_record(),
            misfire=self.misfire.to_record(),
            labels=tuple(self.labels.items()),
            retention=None if self.retention is None else self.retention.to_record(),
            calendars=tuple(self.calendars),
        )


class JobCreate(JobSpec):
    """POST /v1/jobs."""

    _new_job = True


class JobUpdate(JobSpec):
    """PUT /v1/jobs/{id}: the whole definition; omitted fields go back to their defaults."""


def _validate_fields(
    data: Any, handler: ModelWrapValidatorHandler[Any], *, complete: bool
) -> tuple[Any, list[InitErrorDetails], dict[str, Any]]:
    """Run the schema: the model (or None), its errors, and the typed values of the fields it
    accepted, for the checks. ``complete``: a whole definition, whose omitted fields take their
    defaults; else a patch, whose omitted fields are not known here."""
    try:
        model = handler(data)
    except ValidationError as error:
        errors = _line_errors(error)
        refused = {str(detail["loc"][0]) for detail in errors if detail["loc"]}
        return None, errors, _accepted(data, refused, complete=complete)
    names = JobFields.model_fields if complete else model.model_fields_set
    return model, [], {name: getattr(model, name) for name in names}


def _accepted(data: Any, refused: set[str], *, complete: bool) -> dict[str, Any]:
    """The typed values of the fields of ``data`` the schema did not refuse."""
    if not isinstance(data, dict):
        return {}
    given = {key: value for key, value in data.items() if key in JobFields.model_fields}
    try:
        partial = _AcceptedFields.model_validate({k: v for k, v in given.items() if k not in refused})
    except ValidationError:  # refused only in company (nothing is, today): check no further
        return {}
    values = {name: getattr(partial, name) for name in partial.model_fields_set}
    if complete:
        for name, info in JobFields.model_fields.items():
            if name not in given and not info.is_required():
                values[name] = info.get_default(call_default_factory=True)
    return values


# Codes of this module's own refusals (the entry code; tests/fuzz/hooks.py knows them too).
_OWN_CODES = frozenset({"field_order", "payload_invalid"})


def _line_errors(error: ValidationError) -> list[InitErrorDetails]:
    """A ValidationError's errors, to be raised again with others (refused input not kept)."""
    found: list[InitErrorDetails] = []
    for detail in error.errors(include_url=False):
        kind = detail["type"]
        if kind in _OWN_CODES:  # not one of pydantic's: made again with its message
            kind = PydanticCustomError(kind, "{message}", {"message": detail["msg"]})  # type: ignore[assignment]
        entry = InitErrorDetails(type=kind, loc=detail["loc"], input=None)
        if "ctx" in detail:
            entry["ctx"] = detail["ctx"]
        found.append(entry)
    return found


# Fields whose record attribute has the same name and value as the request's (the rest convert).
_CONVERTED = ("target", "retry", "misfire", "labels", "retention", "calendars")
_PLAIN_FIELDS = tuple(name for name in JobFields.model_fields if name not in _CONVERTED)


def spec_fields(job: Job) -> dict[str, Any]:
    """The client-defined part of a stored job, as JSON-ready values (what a PUT would send):
    :class:`JobSpec`'s fields, in its order."""
    return {name: _json_value(value) for name, value in _definition(job).items()}


def _definition(job: Job) -> dict[str, Any]:
    """:class:`JobSpec`'s fields from a job record (enums and instants as they are)."""
    converted = {
        "target": target_from_record(job.target),
        "retry": {name: getattr(job.retry, name) for name in RetrySpec.model_fields},
        "misfire": {
            "policy": job.misfire.mode.value,
            "grace_s": job.misfire.grace_s,
            "max_catch_up": job.misfire.max_catch_up,
        },
        "labels": dict(job.labels),
        "retention": None
        if job.retention is None
        else {"keep_days": job.retention.keep_days, "keep_runs": job.retention.keep_runs},
        "calendars": list(job.calendars),
    }
    return {
        name: converted[name] if name in converted else getattr(job, name) for name in JobFields.model_fields
    }


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return utc_text(value)
    if isinstance(value, enum.Enum):
        return value.value
    return value


class _JobPatchBase(StrictModel):
    """PATCH /v1/jobs/{id}: only the fields given change. ``retry`` and ``misfire`` merge into
    the stored policy field by field; ``target`` and ``labels`` are replaced whole; ``null``
    clears a nullable field (``dst_gap``, ``start_at``, ``payload`` ...) and is refused for the
    others. Every field is :class:`JobSpec`'s, with the same constraints and docs."""

    @model_validator(mode="wrap")
    @classmethod
    def _one_round(cls, data: Any, handler: ModelWrapValidatorHandler[_JobPatchBase]) -> _JobPatchBase:
        patch, errors, values = _validate_fields(data, handler, complete=False)
        problems = checks.definition_problems(values, complete=False)
        if errors or problems:
            raise ValidationError.from_exception_data(cls.__name__, errors + checks.line_errors(problems))
        assert isinstance(patch, _JobPatchBase)
        return patch

    def apply_to(self, job: Job) -> dict[str, Any]:
        """The full definition after this patch, as a JSON-ready dict to validate as
        :class:`JobUpdate`."""
        merged = spec_fields(job)
        given = self.model_dump(mode="json", exclude_unset=True)
        for key in ("retry", "misfire"):
            if key in given:
                given[key] = {**merged[key], **given[key]}
        merged.update(given)
        return merged


if TYPE_CHECKING:
    JobPatch = _JobPatchBase
else:
    JobPatch = partial_model(JobSpec, "JobPatch", _JobPatchBase, _JobPatchBase.__doc__)

_AcceptedFields = partial_model(JobFields, "AcceptedFields", StrictModel, "")


def job_update_from_json(data: dict[str, Any]) -> JobUpdate:
    """Validate a JSON-ready dict as a full definition (the same way a request body is)."""
    return JobUpdate.model_validate_json(json.dumps(data))


class LastRunOut(OutModel):
    """The summary of a job's most recent run."""

    id: str
    state: RunStateName
    slot: datetime
    finished_at: datetime | None


class RecentRunOut(OutModel):
    """What a sparkline shows of one of a job's recent runs."""

    slot: datetime
    state: RunStateName
    lateness_ms: float | None = Field(
        description="Fire lateness: queued at minus the slot; null until queued."
    )
    duration_ms: float | None = Field(description="Finished minus started; null until finished.")

    @classmethod
    def from_record(cls, sample: RunSample) -> RecentRunOut:
        return cls(
            slot=sample.slot,
            state=sample.state,
            lateness_ms=None if sample.lateness_us is None else sample.lateness_us / 1000,
            duration_ms=None if sample.duration_us is None else sample.duration_us / 1000,
        )


class JobOut(JobFields):
    """A stored job: its definition (the same fields as a request's) plus the server's
    read-only fields."""

    id: str
    version: int = Field(description="Bumped by every change; the ETag.")
    paused: bool
    pause_note: str | None
    paused_at: datetime | None
    created_at: datetime | None
    updated_at: datetime | None
    next_run_at: datetime | None = Field(description="The next slot not yet fired; null when none is left.")
    next_fire_at: datetime | None = Field(
        description="When next_run_at fires: the slot plus its jitter offset (the slot itself without "
        "jitter); null when none is left."
    )
    last_run: LastRunOut | None
    plain_values: list[str] = Field(
        description="Header and env values held in clear in the job, not as references to secrets "
        "(e.g. `target.headers.Authorization`): move them into secrets with `cronwheel secrets adopt`."
    )
    schedule_description: str = Field(
        description='The schedule in words, such as "at 09:00 on Monday through Friday" (docs/schedules.md).'
    )
    late: bool = Field(
        description="Not paused, with a slot more than 60 s past that has not fired (the `late` filter)."
    )
    recent: list[RecentRunOut] | None = Field(
        default=None,
        description="The newest runs, oldest first, with `include=recent` on the job list; else null.",
    )

    @classmethod
    def from_record(
        cls,
        job: Job,
        last_run: Run | None = None,
        *,
        now: datetime,
        recent: Sequence[RunSample] | None = None,
    ) -> JobOut:
        """The stored job (its payload is not measured again: it was when it was written), late
        or not at ``now``."""
        return cls.model_validate(
            {
                **_definition(job),
                "id": job.id,
                "version": job.version,
                "paused": job.paused,
                "pause_note": job.pause_note,
                "paused_at": job.paused_at,
                "created_at": job.created_at,
                "updated_at": job.updated_at,
                "next_run_at": job.next_run_at,
                "next_fire_at": None
                if job.next_run_at is None
                else fire_at(job.id, job.next_run_at, job.jitter_s),
                "plain_values": plain_values(job.target),
                "schedule_description": schedule_description(job),
                "late": is_late(job, now),
                "recent": None if recent is None else [RecentRunOut.from_record(sample) for sample in recent],
                "last_run": None
                if last_run is None
                else LastRunOut(
                    id=last_run.id, state=last_run.state, slot=last_run.slot, finished_at=last_run.finished_at
                ),
            },
            context={"stored": True},
        )


def schedule_description(job: Job) -> str:
    """The job's schedule in words (its own ``H`` values: seeded with its id)."""
    try:
        schedule = parse_schedule(
            job.schedule, job.timezone, dst_gap=job.dst_gap, dst_fold=job.dst_fold, seed=job.id or None
        )
    except ScheduleError as error:  # stored before a zone went away: say why, do not fail the read
        return f"invalid schedule: {error.reason}"
    return describe(schedule) + calendars_description(job)


def calendars_description(job: Job) -> str:
    """What the job's calendars add to its schedule in words ("" without calendars)."""
    if not job.calendars:
        return ""
    names = ", ".join(job.calendars)
    if job.calendar_shift is CalendarShift.NONE:
        return f"; skipped on the days calendar {names} closes"
    return f"; on the days calendar {names} closes, on the {job.calendar_shift.value} open day instead"


VALIDATION_FIRES = 5  # fire times a validation answers
_JUST_BEFORE = timedelta(microseconds=1)  # start_at itself may be a fire time


class JobValidation(JobFields):
    """What ``POST /v1/jobs:validate`` (and ``/v1/jobs/{id}/validate``) answer for a definition the
    service accepts: the definition as it would be stored (defaults filled in, values normalized),
    its first slot, the schedule in words, its next fire times and the preview's warnings."""

    id: str | None = Field(description="The job the definition would replace; null for a new job.")
    next_run_at: datetime | None = Field(description="The first slot it would fire at.")
    schedule_description: str = Field(description="The schedule in words.")
    fires: list[FireOut] = Field(
        description=f"The next {VALIDATION_FIRES} fire times within start_at and end_at, with DST facts "
        "and the calendars' marks."
    )
    warnings: list[str] = Field(description="What the schedule preview warns about.")

    @classmethod
    def from_record(cls, job: Job, now: datetime) -> JobValidation:
        """The validated ``job`` (``id`` empty for a new one: ``H`` then hashes the empty seed)."""
        schedule = parse_schedule(
            job.schedule, job.timezone, dst_gap=job.dst_gap, dst_fold=job.dst_fold, seed=job.id or None
        )
        after = now if job.start_at is None or job.start_at <= now else job.start_at - _JUST_BEFORE
        fires = [
            fire
            for fire in fires_of(
                schedule,
                after,
                VALIDATION_FIRES,
                job.calendar_spec,
                job.calendar_shift,
                (job.id or None, job.jitter_s),
            )
            if job.end_at is None or fire.utc <= job.end_at
        ]
        return cls.model_validate(
            {
                **_definition(job),
                "id": job.id or None,
                "next_run_at": job.next_run_at,
                "schedule_description": describe(schedule) + calendars_description(job),
                "fires": fires,
                "warnings": schedule_warnings(schedule, after)
                + jitter_warnings(job.id or None, job.jitter_s),
            },
            context={"stored": True},
        )


class JobPage(OutModel):
    items: list[JobOut]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last.")


# -- actions -----------------------------------------------------------------------------------


class PauseIn(StrictModel):
    note: Annotated[str, StringConstraints(max_length=1000)] | None = None


class ResumeIn(StrictModel):
    missed: Literal["skip", "misfire"] = Field(
        "skip",
        description="skip: record the slots missed while paused as SKIPPED; "
        "misfire: leave them to the job's misfire policy.",
    )


class TriggerIn(StrictModel):
    payload: Payload = Field(
        default=None, description="Replaces the job's payload for this run (when given)."
    )

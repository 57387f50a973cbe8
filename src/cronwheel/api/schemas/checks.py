"""The checks of a job definition that its schema cannot state, run inside validation.

A schema says that ``schedule`` is a string; only the schedule engine says that ``61 * * * *`` is
out of range, only the server's target policy that ``http://10.0.0.1/`` is refused, and only the
clock that an ``end_at`` has passed. These checks run in the wrap validators of the request
models (:class:`~cronwheel.api.schemas.jobs.JobSpec`, :class:`~cronwheel.api.schemas.jobs.JobPatch`), on
every field the schema accepted, so one request gets one problem listing all of its errors, as
``cronwheel apply`` lists every problem of a file.

The server's part (target policy and clock) is bound per request by :func:`bind`, which an async
dependency of the routes that take a job body calls: FastAPI validates a body before it calls the
route and passes no validation context, so a context variable carries it (an async dependency
runs in the request's own task, where the body is then validated). Unbound, as when the CLI checks
a file, only the checks that need no server run: schedule, zone and DST options.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic_core import InitErrorDetails, PydanticCustomError

from cronwheel.api.schemas.policies import MisfireSpec
from cronwheel.errors import InvalidInputError
from cronwheel.jobs.service import TargetPolicy, delete_after_success_refusal, no_slot_reason
from cronwheel.model import (
    Job,
    PythonTarget,
    Target,
)
from cronwheel.schedule import ScheduleError, load_zone, parse_schedule
from cronwheel.targets.kinds import check_target, kind_of


@dataclass(frozen=True, slots=True)
class Checks:
    """What the server contributes to the checks (None: not known here, not checked)."""

    policy: TargetPolicy | None = None
    now: datetime | None = None


_CHECKS: ContextVar[Checks | None] = ContextVar("cronwheel_api_checks", default=None)
_UNBOUND = Checks()


def bind(policy: TargetPolicy, now: datetime) -> None:
    """Bind the server's policy and clock for the validation of the current request's body
    (from an async dependency: a sync one runs on a worker thread, in a copy of the context)."""
    _CHECKS.set(Checks(policy, now))


@dataclass(frozen=True, slots=True)
class FieldProblem:
    """One refused field: where, why, a stable code, and facts for the problem entry."""

    field: str
    message: str
    code: str
    extra: Mapping[str, Any]


def line_errors(problems: list[FieldProblem]) -> list[InitErrorDetails]:
    """The problems as pydantic errors, to be raised with the schema's own in one ValidationError.
    ``ctx`` carries the extras (``cron_field``, ``column`` ...) and, as ``detail``, the whole
    sentence when the message is only the reason."""
    return [
        InitErrorDetails(
            type=PydanticCustomError(
                problem.code, "{message}", {"message": problem.message, **problem.extra}
            ),
            loc=tuple(problem.field.split(".")),
            input=None,  # refused values are never echoed (they may be secrets)
        )
        for problem in problems
    ]


def definition_problems(
    values: Mapping[str, Any], *, complete: bool, new_job: bool = False
) -> list[FieldProblem]:
    """The problems of the fields in ``values`` (typed; only those the schema accepted).
    ``complete``: ``values`` is a whole definition (omitted fields took their defaults), not a
    patch. ``new_job``: a job about to be created, which must have a slot to fire."""
    bound = _CHECKS.get() or _UNBOUND
    invalid_target = target_problems(values)
    problems = schedule_problems(values, complete=complete) + invalid_target
    if bound.policy is not None:  # a target nothing could run is not judged by the policy too
        problems += policy_problems(values, bound.policy, target=not invalid_target)
    problems += once_problems(values)
    if new_job and bound.now is not None and not problems:
        problems += slot_problems(values, bound.now)
    return problems


def once_problems(values: Mapping[str, Any]) -> list[FieldProblem]:
    """``delete_after_success`` on a job that is not one-time (a patch that gives one of the
    two is judged on the merged definition)."""
    schedule, flag = values.get("schedule"), values.get("delete_after_success")
    if not isinstance(schedule, str) or not isinstance(flag, bool):
        return []
    refused = delete_after_success_refusal(schedule, flag)
    return [] if refused is None else [_sentence("delete_after_success", refused, "not_one_time")]


def schedule_problems(values: Mapping[str, Any], *, complete: bool) -> list[FieldProblem]:
    """The schedule's and the zone's problems, each on its own field (a bad zone does not hide a
    bad expression). A patch that gives a schedule without a zone is checked in UTC here; the
    merged definition is checked again in its own zone."""
    expression = values.get("schedule")
    zone = values.get("timezone", "UTC" if complete else None)
    problems: list[FieldProblem] = []
    if isinstance(zone, str):
        try:
            load_zone(zone, expression if isinstance(expression, str) else "")
        except ScheduleError as error:
            problems.append(schedule_problem(error))
            zone = None
    if isinstance(expression, str):
        try:
            parse_schedule(
                expression, zone or "UTC", dst_gap=values.get("dst_gap"), dst_fold=values.get("dst_fold")
            )
        except ScheduleError as error:
            problems.append(schedule_problem(error))
    return problems


def schedule_problem(error: ScheduleError, expression_field: str = "schedule") -> FieldProblem:
    """A refused schedule on the field it names: the zone, a DST option, or the expression with
    the cron field, its index and the column inside it; without the text refused
    (:func:`schedule_sentence`)."""
    reason = refused_reason(error)
    detail = {"detail": schedule_sentence(error)}
    if error.field == "timezone":
        return FieldProblem("timezone", reason, "invalid_schedule", detail)
    for option in ("dst_gap", "dst_fold", "seed"):
        if error.reason.startswith(option):
            return FieldProblem(option, reason, "invalid_schedule", detail)
    extra: dict[str, Any] = {}
    if error.field is not None:
        extra["cron_field"] = error.field
    if error.field_index is not None:
        extra["cron_field_index"] = error.field_index
    if error.column is not None:
        extra["column"] = error.column
    return FieldProblem(expression_field, reason, "invalid_schedule", {**extra, **detail})


_QUOTED = re.compile(r"'([^']*)'|\"([^\"]*)\"")
REFUSED = "'…'"  # what stands for a refused text in a problem


def refused_reason(error: ScheduleError) -> str:
    """``error``'s reason without the text it refused: a quoted piece of the expression (a cron
    field's element, a macro), or the zone (the first quoted part of a zone's reason). The
    field, its index and the column say where the piece is; the server's own words (a zone it
    suggests, the names a field takes) stay."""
    if error.field == "timezone":
        return _QUOTED.sub(REFUSED, error.reason, count=1)

    def masked(found: re.Match[str]) -> str:
        text = found.group(1) if found.group(1) is not None else found.group(2)
        return REFUSED if text and text in error.expression else found.group(0)

    return _QUOTED.sub(masked, error.reason)


def schedule_sentence(error: ScheduleError) -> str:
    """The problem's sentence of ``error``: where and why, without the expression."""
    spots = (
        f"field {error.field_index}" if error.field_index is not None else "",
        f"column {error.column}" if error.column is not None else "",
    )
    where = ", ".join(spot for spot in spots if spot)
    place = "" if error.field is None else f"{error.field} field ({where}): " if where else f"{error.field}: "
    return f"invalid schedule: {place}{refused_reason(error)}"


def target_problems(values: Mapping[str, Any]) -> list[FieldProblem]:
    """What no attempt could run, whatever the policy (:mod:`cronwheel.targets.checks`: a NUL byte in an
    argument, a URL the HTTP client refuses ...), on the field the check names."""
    target = values.get("target")
    if target is None:
        return []
    try:
        check_target(target.to_record())
    except InvalidInputError as error:
        return [_sentence(_named_field(str(error)), str(error), "target_invalid")]
    return []


def _named_field(message: str) -> str:
    """``target.argv`` of "target.argv[1] contains a NUL byte", ``target.headers.Host`` of
    "target.headers.Host is ..." (the checks name their field first)."""
    found = _FIELD.match(message)
    return found.group(1) if found else "target"


_FIELD = re.compile(
    r"(target(?:\.(?:headers|metadata)\.[!#$%&'*+\-.^_`|~0-9A-Za-z]*[!#$%&'*+\-^_`|~0-9A-Za-z]|\.[a-z_]+)?)"
)


def policy_problems(
    values: Mapping[str, Any], policy: TargetPolicy, *, target: bool = True
) -> list[FieldProblem]:
    """What the operator's policy refuses: the target (unless ``target`` is false), and a queue
    no worker here serves."""
    problems: list[FieldProblem] = []
    given = values.get("target") if target else None
    if given is not None:
        record: Target = given.to_record()
        try:
            policy.check(record)
        except InvalidInputError as error:
            problems.append(_sentence(kind_of(record).refused_field, str(error), "target_refused"))
    queue = values.get("queue")
    if isinstance(queue, str):
        try:
            policy.check_queue(queue)
        except InvalidInputError as error:
            problems.append(_sentence("queue", str(error), "queue_not_served"))
    return problems


_TIMING = ("schedule", "timezone", "dst_gap", "dst_fold", "start_at", "end_at")
_NO_TARGET = PythonTarget("timing:only")  # no_slot_reason reads the timing fields alone


def slot_problems(values: Mapping[str, Any], now: datetime) -> list[FieldProblem]:
    """A new job that would never fire (``end_at`` passed, its window holds no fire time, or its
    ``@at`` instant passed and its misfire policy would not run it late).
    Judged with an empty seed for ``H``; the service judges again with the job's id."""
    if not all(name in values for name in _TIMING):
        return []
    timing: dict[str, Any] = {name: values[name] for name in _TIMING}
    misfire = values.get("misfire")
    if isinstance(misfire, MisfireSpec):  # a one-time job whose instant passed runs by it, or not
        timing["misfire"] = misfire.to_record()
    job = Job(id="", team="", name="", target=_NO_TARGET, **timing)
    reason = no_slot_reason(job, now)
    return [] if reason is None else [_sentence(reason[0], reason[1], "no_slot")]


def _sentence(field: str, message: str, code: str) -> FieldProblem:
    """A problem whose message is a whole sentence: it is the problem's detail as it stands."""
    return FieldProblem(field, message, code, {"detail": message})

"""Every error the gRPC API answers with: cronwheel's errors as gRPC status codes with
``google.rpc`` details (``grpc-status-details-bin``, read with ``grpc_status.rpc_status``).

The one place that maps exceptions to gRPC, from the same error classes REST maps to problem
details (:mod:`cronwheel.api.problems`), with the same field names:

=================================================  ==================  =========================
error                                              code                details
=================================================  ==================  =========================
invalid input (schema, checks, schedule, cursor)   INVALID_ARGUMENT    BadRequest field violations
no token, an invalid one                           UNAUTHENTICATED     ErrorInfo
missing scope, a field the caller may not set      PERMISSION_DENIED   ErrorInfo
no such object, or another team's                  NOT_FOUND           ErrorInfo
a name taken (REST 409)                            ALREADY_EXISTS      ErrorInfo
expected_version moved (REST 412, If-Match)        FAILED_PRECONDITION PreconditionFailure
a backfill no longer running (REST 409)            FAILED_PRECONDITION PreconditionFailure
a team's job quota, a rate limit                   RESOURCE_EXHAUSTED  QuotaFailure / RetryInfo
a backend unavailable, a race lost (retryable)     UNAVAILABLE         RetryInfo
anything else                                      INTERNAL            (logged; nothing said)
=================================================  ==================  =========================

A field violation's ``field`` is REST's ``field`` (``schedule``, ``target.url``, ``cursor``),
its ``description`` the reason; refused values are never echoed (they may be secrets).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status
from pydantic import ValidationError

from cronwheel.api.problems import (
    ProblemError,
    VersionConflictError,
    field_error,
    pydantic_errors,
    schedule_field_errors,
)
from cronwheel.errors import (
    ConflictError,
    FieldRefusedError,
    ForbiddenError,
    InvalidInputError,
    NotFoundError,
    NotRunningError,
    QuotaExceededError,
    RateLimitedError,
    TransientError,
    UnauthenticatedError,
)
from cronwheel.jobs.backfill import BackfillRefusedError
from cronwheel.jobs.service import JitterTooWideError, NoSlotError, PlainCredentialError, UnknownSecretError
from cronwheel.limits import TooFrequentError
from cronwheel.schedule import ScheduleError

log = logging.getLogger("cronwheel.grpc")

DOMAIN = "cronwheel.dev"
_BY_STATUS = {  # a ProblemError's HTTP status -> code
    400: code_pb2.INVALID_ARGUMENT,
    401: code_pb2.UNAUTHENTICATED,
    403: code_pb2.PERMISSION_DENIED,
    404: code_pb2.NOT_FOUND,
    409: code_pb2.ALREADY_EXISTS,
    412: code_pb2.FAILED_PRECONDITION,
    422: code_pb2.INVALID_ARGUMENT,
    429: code_pb2.RESOURCE_EXHAUSTED,
    503: code_pb2.UNAVAILABLE,
}


def _packed(*details: Any) -> list[any_pb2.Any]:
    packed = []
    for detail in details:
        holder = any_pb2.Any()
        holder.Pack(detail)
        packed.append(holder)
    return packed


def _bad_request(entries: Sequence[dict[str, Any]]) -> error_details_pb2.BadRequest:
    return error_details_pb2.BadRequest(
        field_violations=[
            error_details_pb2.BadRequest.FieldViolation(
                field=entry["field"] or entry["location"],
                description=entry["message"],
                reason=str(entry.get("code", "invalid")),
            )
            for entry in entries
        ]
    )


def _info(reason: str, **metadata: str) -> error_details_pb2.ErrorInfo:
    return error_details_pb2.ErrorInfo(reason=reason, domain=DOMAIN, metadata=metadata)


def _retry(seconds: int) -> error_details_pb2.RetryInfo:
    return error_details_pb2.RetryInfo(retry_delay=duration_pb2.Duration(seconds=seconds))


def _invalid(detail: str, entries: Sequence[dict[str, Any]]) -> status_pb2.Status:
    return _status(code_pb2.INVALID_ARGUMENT, detail, _bad_request(entries))


def _status(code: int, message: str, *details: Any) -> status_pb2.Status:
    return status_pb2.Status(code=code, message=message, details=_packed(*details))


# The refusals of one field, and their codes (REST's, cronwheel.api.problems).
_ONE_FIELD: tuple[tuple[type[NoSlotError | TooFrequentError | JitterTooWideError], str], ...] = (
    (NoSlotError, "no_slot"),
    (TooFrequentError, "schedule_too_frequent"),
    (JitterTooWideError, "jitter_too_wide"),
)


def _input_entries(error: InvalidInputError) -> list[dict[str, Any]]:
    """The fields an :class:`InvalidInputError` names (as REST's problem entries do)."""
    for kind, code in _ONE_FIELD:
        if isinstance(error, kind):
            return [field_error(error.field, str(error), code=code)]
    if isinstance(error, UnknownSecretError):
        return [field_error(field, why, code="secret_not_found") for field, why in error.problems]
    if isinstance(error, PlainCredentialError):
        return [field_error(field, why, code="plain_credential") for field, why in error.problems]
    if isinstance(error, FieldRefusedError):  # a calendar's part, or a job's calendars
        return [field_error(error.field, error.reason, code=error.code)]
    if isinstance(error, BackfillRefusedError):  # REST's field names: from (start), to (end), confirm
        return [field_error(error.field, str(error), code=error.code)]
    return []


def status_of(error: BaseException) -> status_pb2.Status:
    """The ``google.rpc.Status`` that answers ``error``."""
    invalid = _invalid_status(error)
    if invalid is not None:
        return invalid
    return _refusal(error)


def _invalid_status(error: BaseException) -> status_pb2.Status | None:
    """INVALID_ARGUMENT with the fields it names, or the code a ProblemError's status stands for."""
    if isinstance(error, ValidationError):
        entries = pydantic_errors(error.errors(include_url=False), "body")
        fields = ", ".join(dict.fromkeys(entry["field"] or entry["location"] for entry in entries))
        return _invalid(f"invalid field{'s' if len(entries) != 1 else ''}: {fields}", entries)
    if isinstance(error, ProblemError):
        code = _BY_STATUS.get(error.status, code_pb2.UNKNOWN)
        if code == code_pb2.INVALID_ARGUMENT:
            return _invalid(error.detail, error.errors)
        return _status(code, error.detail, _info(error.slug))
    if isinstance(error, ScheduleError):
        return _invalid(str(error), schedule_field_errors(error))
    if isinstance(error, InvalidInputError):
        return _invalid(str(error), _input_entries(error))
    return None


def _refusal(error: BaseException) -> status_pb2.Status:  # noqa: PLR0911 - one answer per kind
    if isinstance(error, UnauthenticatedError):
        message = str(error) or "a valid token is required"
        return _status(code_pb2.UNAUTHENTICATED, message, _info("unauthenticated"))
    if isinstance(error, ForbiddenError):
        return _status(code_pb2.PERMISSION_DENIED, str(error) or "not allowed", _info("forbidden"))
    if isinstance(error, NotFoundError):
        return _status(code_pb2.NOT_FOUND, str(error) or "no such resource", _info("not-found"))
    if isinstance(error, VersionConflictError):
        violation = error_details_pb2.PreconditionFailure.Violation(
            type="VERSION", subject="expected_version", description=str(error)
        )
        failure = error_details_pb2.PreconditionFailure(violations=[violation])
        return _status(code_pb2.FAILED_PRECONDITION, str(error), failure)
    if isinstance(error, NotRunningError):
        violation = error_details_pb2.PreconditionFailure.Violation(
            type="STATE", subject=error.state, description=str(error)
        )
        failure = error_details_pb2.PreconditionFailure(violations=[violation])
        return _status(code_pb2.FAILED_PRECONDITION, str(error), failure)
    if isinstance(error, ConflictError):
        return _status(code_pb2.ALREADY_EXISTS, str(error) or "conflict", _info("conflict"))
    if isinstance(error, QuotaExceededError):
        quota = error_details_pb2.QuotaFailure(
            violations=[
                error_details_pb2.QuotaFailure.Violation(subject=f"team:{error.team}", description=str(error))
            ]
        )
        return _status(code_pb2.RESOURCE_EXHAUSTED, str(error), quota)
    if isinstance(error, RateLimitedError):
        return _status(code_pb2.RESOURCE_EXHAUSTED, str(error), _retry(error.retry_after_s))
    if isinstance(error, TransientError):
        log.warning("action=grpc_unavailable error=%s", type(error).__name__)
        return _status(code_pb2.UNAVAILABLE, "a backend is unavailable; try again shortly", _retry(1))
    log.error("action=grpc_internal error=%s", type(error).__name__, exc_info=error)
    return _status(code_pb2.INTERNAL, "the server failed to handle this call; the error is logged")


def grpc_status(error: BaseException) -> grpc.Status:
    """``error`` as what ``ServicerContext.abort`` takes (code, message, the details' trailer)."""
    return rpc_status.to_status(status_of(error))

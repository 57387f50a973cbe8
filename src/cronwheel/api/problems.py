"""Every error the API answers with, as RFC 9457 problem details (``application/problem+json``).

The one place that maps exceptions to HTTP: routes raise cronwheel's own errors (or
:class:`ProblemError` when they know better), and :func:`install` turns each into a problem with
``type``, ``title``, ``status``, ``detail`` and ``instance``; validation problems add ``errors``,
one entry per refused field, each naming the field (``field``: dotted path; ``pointer``: JSON
Pointer into the body) and the reason. Request bodies are never logged or echoed back: they may
carry secrets (webhook headers, command environments).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cronwheel.api.callers import auditing
from cronwheel.api.guards import methods
from cronwheel.api.schemas.checks import schedule_problem, schedule_sentence
from cronwheel.errors import (
    BackendUnavailableError,
    ConflictError,
    FieldRefusedError,
    ForbiddenError,
    HiddenError,
    InvalidInputError,
    NotFoundError,
    NotRunningError,
    QuotaExceededError,
    RateLimitedError,
    UnauthenticatedError,
)
from cronwheel.jobs.backfill import BackfillRefusedError
from cronwheel.jobs.service import JitterTooWideError, NoSlotError, PlainCredentialError, UnknownSecretError
from cronwheel.limits import TooFrequentError
from cronwheel.schedule import ScheduleError
from cronwheel.store.port import CalendarInUseError

log = logging.getLogger("cronwheel.api")

PROBLEM_JSON = "application/problem+json"
_TYPE = "urn:cronwheel:problem:"
_TARGET_TAGS = frozenset({"http", "command", "python"})


class VersionConflictError(ConflictError):
    """The job is not at the version the client named in ``If-Match`` (HTTP 412)."""


class ProblemError(Exception):
    """A problem a route states itself (status, slug, title, detail and extension members)."""

    def __init__(
        self,
        status: int,
        slug: str,
        title: str,
        detail: str,
        errors: Sequence[dict[str, Any]] = (),
        **extensions: Any,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.slug = slug
        self.title = title
        self.detail = detail
        self.errors = list(errors)
        self.extensions = extensions


def problem_response(
    request: Request | None,
    status: int,
    slug: str | None,
    title: str,
    detail: str,
    errors: Sequence[dict[str, Any]] | None = None,
    headers: dict[str, str] | None = None,
    **extensions: Any,
) -> JSONResponse:
    body: dict[str, Any] = {
        "type": "about:blank" if slug is None else _TYPE + slug,
        "title": title,
        "status": status,
        "detail": detail,
    }
    if request is not None:  # a URI reference: the path as sent, percent-encoded, never decoded text
        body["instance"] = quote(request.url.path, safe="/:@!$&'()*+,;=-._~")
    if errors is not None:
        body["errors"] = list(errors)
    body.update(extensions)
    return JSONResponse(body, status_code=status, media_type=PROBLEM_JSON, headers=headers)


# -- field paths -----------------------------------------------------------------------------------


def field_error(field: str, message: str, location: str = "body", **extra: Any) -> dict[str, Any]:
    """One entry of a problem's ``errors``: where (``location``, ``field``, ``pointer``) and why."""
    entry: dict[str, Any] = {"location": location, "field": field, "message": message}
    if location == "body":
        entry["pointer"] = "#" + "".join(
            "/" + part.replace("~", "~0").replace("/", "~1") for part in field.split(".") if part
        )
    entry.update(extra)
    return entry


# Facts a check adds to its problem entry (cronwheel.api.schemas.checks puts them in the error's ctx).
_ENTRY_FACTS = ("cron_field", "cron_field_index", "column")


def pydantic_errors(errors: Sequence[Any], location: str | None = None) -> list[dict[str, Any]]:
    """Pydantic's errors as problem entries, without the refused input (it may be a secret):
    neither its value, nor a key or field name the client made up (:func:`_refused_name`)."""
    out: list[dict[str, Any]] = []
    for error in errors:
        loc = [str(part) for part in error.get("loc", ())]
        where = location
        if where is None:
            where = loc.pop(0) if loc and loc[0] in ("body", "query", "path", "header", "cookie") else "body"
        loc = [
            part
            for i, part in enumerate(loc)
            if not (i > 0 and loc[i - 1] == "target" and part in _TARGET_TAGS)
        ]
        loc, message = _refused_name(loc, error)
        ctx = error.get("ctx") or {}
        facts = {key: ctx[key] for key in _ENTRY_FACTS if key in ctx}
        out.append(
            field_error(".".join(loc), message, where, code=str(error.get("type", "invalid")), **facts)
        )
    return out


_PLAIN_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _refused_name(loc: list[str], error: Any) -> tuple[list[str], str]:
    """The entry's field path and message without what the client made up: a part of the path
    that is not a plain name (a dictionary key such as ``labels.<key>``, an unknown field) is
    ``*``; a ``type`` no target has is not repeated (pydantic's message quotes it). Field names
    and plain keys stay: they say where the problem is (``colour``, ``labels.tier``)."""
    message = (
        str(error.get("msg", "invalid")).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    )
    path = [part if part.isdigit() or _PLAIN_NAME.fullmatch(part) else "*" for part in loc if part != "[key]"]
    if error.get("type") == "union_tag_invalid":
        ctx = error.get("ctx") or {}
        message = f"{ctx.get('discriminator', 'type')} must be one of {ctx.get('expected_tags', '')}"
    return path, message


def schedule_field_errors(error: ScheduleError, expression_field: str = "schedule") -> list[dict[str, Any]]:
    """A refused schedule as a problem entry naming the body field, and the cron field, column and
    reason inside the expression."""
    problem = schedule_problem(error, expression_field)
    facts = {key: value for key, value in problem.extra.items() if key in _ENTRY_FACTS}
    return [field_error(problem.field, problem.message, code=problem.code, **facts)]


# -- handlers ------------------------------------------------------------------------------------


async def _request_validation(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    bad_json = [error for error in errors if error.get("type") == "json_invalid"]
    if bad_json:
        reason = (bad_json[0].get("ctx") or {}).get("error", "not valid JSON")
        return problem_response(
            request, 400, "malformed-json", "Malformed JSON", f"the request body is not valid JSON: {reason}"
        )
    return _invalid(request, errors, pydantic_errors(errors))


_VALIDATION = ("validation", "Invalid request")
_KINDS = {  # entry code -> the problem's type and title when every entry has that code
    "invalid_schedule": ("invalid-schedule", "Invalid schedule"),
    "target_refused": ("target-refused", "Target refused"),
    "no_slot": ("no-slot", "Job would never fire"),
    "not_one_time": ("not-one-time", "Only for one-time jobs"),
}


def _invalid(request: Request, errors: Sequence[Any], entries: list[dict[str, Any]]) -> JSONResponse:
    """One 422 for every refused field of the request: schema errors and the checks' together.
    When all are of one kind with a type of its own (``invalid-schedule`` ...), that type."""
    fields = ", ".join(dict.fromkeys(entry["field"] or entry["location"] for entry in entries))
    count = len(entries)
    detail = f"{count} invalid field{'s' if count != 1 else ''}: {fields}" if count else "invalid request"
    if count == 1:
        first, whole = entries[0], (errors[0].get("ctx") or {}).get("detail")
        detail = whole or f"{first['field'] or first['location']}: {first['message']}"
    codes = {entry["code"] for entry in entries}
    slug, title = _KINDS[codes.pop()] if len(codes) == 1 and codes <= _KINDS.keys() else _VALIDATION
    return problem_response(request, 422, slug, title, detail, errors=entries)


async def _validation(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ValidationError)
    errors = exc.errors()
    return _invalid(request, errors, pydantic_errors(errors, "body"))


async def _schedule(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ScheduleError)
    return problem_response(
        request, 422, "invalid-schedule", "Invalid schedule", schedule_sentence(exc),
        errors=schedule_field_errors(exc),
    )  # fmt: skip


async def _invalid_input(request: Request, exc: Exception) -> JSONResponse:
    if isinstance(exc, BackfillRefusedError):  # a range judged against the job and the clock
        errors = [field_error(exc.field, str(exc), code=exc.code, **exc.facts)]
        slug, title = _BACKFILL_PROBLEMS.get(exc.code, ("invalid-backfill", "Invalid backfill"))
        return problem_response(request, 422, slug, title, str(exc), errors=errors, **exc.facts)
    if isinstance(exc, NoSlotError):  # a timing edit judged against the stored job
        errors = [field_error(exc.field, str(exc), code="no_slot")]
        return problem_response(request, 422, "no-slot", "Job would never fire", str(exc), errors=errors)
    if isinstance(exc, UnknownSecretError | PlainCredentialError):  # one entry per field
        code, slug, title = _LISTED[type(exc)]
        errors = [field_error(field, message, code=code) for field, message in exc.problems]
        return problem_response(request, 422, slug, title, str(exc), errors=errors)
    if isinstance(exc, FieldRefusedError):  # a calendar's part, or a job's calendars
        errors = [field_error(exc.field, exc.reason, code=exc.code)]
        return problem_response(request, 422, exc.slug, exc.title, str(exc), errors=errors)
    if isinstance(exc, TooFrequentError | JitterTooWideError):
        return _too_close(request, exc)
    return problem_response(request, 422, "invalid-input", "Invalid input", str(exc), errors=[])


# Refusals that list their fields: each field's code, and the problem's type and title.
_LISTED: dict[type[Exception], tuple[str, str, str]] = {
    UnknownSecretError: ("secret_not_found", "secret-not-found", "Unknown secret"),
    PlainCredentialError: ("plain_credential", "plain-credential", "Plain credential"),
}


def _too_close(request: Request, exc: TooFrequentError | JitterTooWideError) -> JSONResponse:
    """A schedule whose slots come closer than the server allows, or than the job's jitter
    window: the problem names the shortest gap."""
    if isinstance(exc, JitterTooWideError):
        facts: dict[str, Any] = {"jitter_s": exc.jitter_s, "shortest_gap_s": exc.shortest_s}
        slug, title, code = "jitter-too-wide", "Jitter too wide", "jitter_too_wide"
    else:
        facts = {"minimum_interval_s": exc.minimum_s, "shortest_interval_s": exc.shortest_s}
        slug, title, code = "schedule-too-frequent", "Schedule fires too often", "schedule_too_frequent"
    errors = [field_error(exc.field, str(exc), code=code, **facts)]
    return problem_response(request, 422, slug, title, str(exc), errors=errors, **facts)


# The backfill refusals that have a problem type of their own: a client acts on them differently.
_BACKFILL_PROBLEMS = {
    "confirm_required": ("backfill-confirm-required", "Backfill needs confirmation"),
    "too_many_slots": ("backfill-too-large", "Backfill too large"),
}


async def _not_found(request: Request, exc: Exception) -> JSONResponse:
    """404; one at another team's wall (:class:`HiddenError`) is answered alike, and audited."""
    if isinstance(exc, HiddenError):
        await auditing.refused(request, 404, str(exc))
    return problem_response(request, 404, "not-found", "Not found", str(exc) or "no such resource")


async def _unauthenticated(request: Request, exc: Exception) -> JSONResponse:
    await auditing.refused(request, 401, str(exc))
    return problem_response(
        request, 401, "unauthenticated", "Unauthenticated", str(exc) or "a valid token is required",
        headers={"WWW-Authenticate": 'Bearer realm="cronwheel"'},
    )  # fmt: skip


async def _forbidden(request: Request, exc: Exception) -> JSONResponse:
    await auditing.refused(request, 403, str(exc))
    return problem_response(request, 403, "forbidden", "Forbidden", str(exc) or "not allowed")


async def _conflict(request: Request, exc: Exception) -> JSONResponse:
    if isinstance(exc, NotRunningError):  # an action that needs it running, on one that has ended
        return problem_response(request, 409, "not-running", "Not running", str(exc), state=exc.state)
    if isinstance(exc, VersionConflictError):
        return problem_response(
            request, 412, "version-mismatch", "Precondition failed", str(exc) or "the version has changed"
        )
    if isinstance(exc, CalendarInUseError):
        return problem_response(request, 409, "calendar-in-use", "Calendar in use", str(exc), jobs=exc.jobs)
    return problem_response(request, 409, "conflict", "Conflict", str(exc) or "conflict")


async def _quota(request: Request, exc: Exception) -> JSONResponse:
    """409, not 403 or 422: the request is well formed and the caller may make it, but the team's
    current state (full) conflicts with it, and deleting a job resolves it (RFC 9110 15.5.10)."""
    assert isinstance(exc, QuotaExceededError)
    return problem_response(
        request, 409, "quota-exceeded", "Quota exceeded", str(exc), team=exc.team, quota=exc.quota
    )


async def rate_limited(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RateLimitedError)
    return problem_response(
        request, 429, "rate-limited", "Too many requests", str(exc),
        headers={"Retry-After": str(exc.retry_after_s)}, retry_after_s=exc.retry_after_s,
    )  # fmt: skip


async def _unavailable(request: Request, exc: Exception) -> JSONResponse:
    log.warning("backend unavailable on %s %s: %s", request.method, request.url.path, exc)
    return problem_response(
        request, 503, "unavailable", "Service unavailable", "a backend is unavailable; try again shortly",
        headers={"Retry-After": "1"},
    )  # fmt: skip


async def _problem(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ProblemError)
    errors = exc.errors if exc.errors else None
    return problem_response(request, exc.status, exc.slug, exc.title, exc.detail, errors, **exc.extensions)


_FASTAPI_BODY_ERROR = "There was an error parsing the body"
"""FastAPI's 400 when parsing a body raised something other than a JSON syntax error (json.loads'
RecursionError on an array nested about a thousand deep)."""


async def _http(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    headers = dict(exc.headers or {})
    if exc.status_code == 405:  # the path exists: OPTIONS is answered, and Allow names every method
        options = methods.options_response(request)
        if options is not None:
            return options
        headers["Allow"] = ", ".join(methods.allowed_methods(request)) or headers.get("Allow", "")
    if exc.status_code == 400 and exc.detail == _FASTAPI_BODY_ERROR:  # json.loads raised, not as JSON
        detail = "the request body is not valid JSON: it could not be parsed (nested too deeply?)"
        return problem_response(request, 400, "malformed-json", "Malformed JSON", detail)
    if exc.status_code == 404:
        detail = f"no route {request.url.path}" if exc.detail == "Not Found" else str(exc.detail)
        if exc.detail == "Not Found" and request.url.path.startswith("/v1/jobs/"):
            detail += "; a job is /v1/jobs/{id} or /v1/teams/{team}/jobs/{name}"
        title = "Not found"
    else:
        detail, title = str(exc.detail), _TITLES.get(exc.status_code, "Error")
    return problem_response(request, exc.status_code, None, title, detail, headers=headers)


_TITLES = {
    400: "Bad request",
    405: "Method not allowed",
    406: "Not acceptable",
    415: "Unsupported media type",
}


def install(app: FastAPI) -> None:
    """Register every handler on ``app`` and wrap it so that nothing escapes unanswered."""
    app.add_exception_handler(RequestValidationError, _request_validation)
    app.add_exception_handler(ValidationError, _validation)
    app.add_exception_handler(ProblemError, _problem)
    app.add_exception_handler(ScheduleError, _schedule)
    app.add_exception_handler(InvalidInputError, _invalid_input)
    app.add_exception_handler(NotFoundError, _not_found)
    app.add_exception_handler(UnauthenticatedError, _unauthenticated)
    app.add_exception_handler(ForbiddenError, _forbidden)
    app.add_exception_handler(ConflictError, _conflict)
    app.add_exception_handler(QuotaExceededError, _quota)
    app.add_exception_handler(RateLimitedError, rate_limited)
    app.add_exception_handler(BackendUnavailableError, _unavailable)
    app.add_exception_handler(StarletteHTTPException, _http)
    app.add_middleware(UnexpectedErrors)


class UnexpectedErrors:
    """Any exception no handler took: a 500 problem that says nothing of the internals, and a log
    line (method, path, traceback; never the body)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except ClientDisconnect:  # the client left before its answer: no one to answer, nothing wrong
            log.debug("client left during %s %s", scope.get("method"), scope.get("path"))
        except Exception:
            log.exception("unexpected error on %s %s", scope.get("method"), scope.get("path"))
            if started:
                raise
            request = Request(scope)
            response = problem_response(
                request, 500, "internal", "Internal server error",
                "the server failed to handle this request; the error is logged",
            )  # fmt: skip
            await response(scope, receive, send)

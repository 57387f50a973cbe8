"""What one request and one caller may take of the API (the operator's :class:`~cronwheel.limits.Limits`).

Each refusal is a problem (``application/problem+json``) that names the limit and the option that
sets it, and comes before anything is written:

* :class:`HeaderLimits` (ASGI): more header fields than ``max_header_count``, or names and values
  longer than ``max_header_bytes`` together: 431, before the application runs. The HTTP server
  bounds what it buffers while a request head arrives (uvicorn's h11
  ``max_incomplete_event_size``, set by the server from the same limit), but a head that arrives
  in one read is handed over whole, whatever its size (10,000 header fields would pass it).
* :class:`BodyLimit` (ASGI): a ``Content-Length`` over ``max_body_bytes`` is refused (413) before
  a byte of the body is read; a body without one is counted as it arrives and refused as soon as
  it passes the limit. Either way the body is never parsed, so an oversized body costs no memory or
  JSON parsing before validation could refuse it.
* :func:`rate_limit` (a dependency of every ``/v1`` route): a token bucket per caller (its token
  id or OIDC subject; the client address of the trusted caller of an app without authentication):
  429 with ``Retry-After``. The buckets (:mod:`cronwheel.api.guards.rate`) are shared with the gRPC API,
  which answers the same refusal as RESOURCE_EXHAUSTED: one budget per caller over both. The
  buckets live in this process: a cluster of N api processes behind a load balancer lets a
  caller make N times the rate, which is acceptable, since the limit is there to keep one caller
  from taking a process's whole capacity, and each process keeps its own. The probes and
  ``/metrics`` are not limited: they are cheap, and a probe refused for somebody else's traffic
  would restart a healthy node.
* Failed authentications take from buckets of their client address and token id, and are refused
  (429) before their credential is checked once those are spent: :mod:`cronwheel.api.callers.failures`,
  in :func:`cronwheel.api.callers.auth.authenticate`.
* :func:`bounded_query`: a query parameter repeated more than :data:`MAX_REPEATED` times
  (``label``, ``state``): 422, before the store sees a query it could only refuse as an outage.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.params import Depends as DependsParam
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cronwheel.api.callers.auth import CallerDep
from cronwheel.api.guards.rate import caller_key
from cronwheel.api.openapi import PROBLEM_DOC, RETRY_AFTER
from cronwheel.api.problems import ProblemError, field_error, problem_response
from cronwheel.api.services import ApiServices
from cronwheel.limits import Limits

MAX_REPEATED = 64
"""Values of one repeated query parameter: a job has at most 64 labels, so a filter of more
labels matches nothing, and there are six run states. Far below what the store can run (SQLite
refused 1,000 ``label`` filters with "Expression tree is too large")."""

HEAD_ROOM = 64 * 1024
"""What the HTTP server may buffer of a request head beyond ``max_header_bytes``: the request
line (a query of 64 label filters is 20 KiB), and room to answer a head a little over the limit
with this module's 431 rather than the server's plain-text 400."""


def head_buffer_bytes(limits: Limits) -> int:
    """uvicorn's ``h11_max_incomplete_event_size``: the most of a request head it buffers while
    the head has not arrived whole (h11's default is 16 KiB, below ``max_header_bytes``). A head
    that arrives in one read is handed over whole: :class:`HeaderLimits` judges it."""
    return limits.max_header_bytes + HEAD_ROOM


def services_of(scope: Scope) -> ApiServices:
    services = scope["app"].state.services
    assert isinstance(services, ApiServices)
    return services


def limits_of(scope: Scope) -> Limits:
    return services_of(scope).limits


def install(app: FastAPI) -> None:
    """Add the request limits to ``app``: the middlewares (outside every other one, in this order:
    headers, body). The rate limiter's buckets are the services' own
    (``ApiServices.rate_limiter``), which the gRPC API takes from as well."""
    app.add_exception_handler(BodyTooLarge, body_too_large)
    app.add_middleware(BodyLimit)
    app.add_middleware(HeaderLimits)


# -- headers ---------------------------------------------------------------------------------------


class HeaderLimits:
    """431 for a request with too many header fields, or too many bytes of them."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = header_refusal(scope["headers"], limits_of(scope))
            if refusal is not None:
                detail, members = refusal
                title = "Request header fields too large"
                response = problem_response(
                    Request(scope), 431, "headers-too-large", title, detail, **members
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def header_refusal(headers: list[tuple[bytes, bytes]], limits: Limits) -> tuple[str, dict[str, Any]] | None:
    """Why ``headers`` are refused (the detail and the limit, as a problem's members), or None."""
    if len(headers) > limits.max_header_count:
        detail = (
            f"the request has {len(headers)} header fields; this server accepts at most "
            f"{limits.max_header_count} (--max-header-count)"
        )
        return detail, {"max_header_count": limits.max_header_count}
    size = sum(len(name) + len(value) for name, value in headers)
    if size > limits.max_header_bytes:
        detail = (
            f"the request's header fields take {size} bytes; this server accepts at most "
            f"{limits.max_header_bytes} (--max-header-bytes)"
        )
        return detail, {"max_header_bytes": limits.max_header_bytes}
    return None


# -- body ------------------------------------------------------------------------------------------


class BodyTooLarge(HTTPException):
    """Raised while a body is received (an HTTPException, so that FastAPI's body reading lets it
    through instead of calling it malformed); answered by :func:`body_too_large`."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            413,
            f"the request body is larger than {limit} bytes, the most this server accepts (--max-body-bytes)",
        )
        self.limit = limit


async def body_too_large(request: Request, exc: Exception) -> JSONResponse:
    """The 413 problem (an exception handler); the connection is closed after it, since the rest
    of the body was not read."""
    assert isinstance(exc, BodyTooLarge)
    return problem_response(
        request, 413, "body-too-large", "Content too large", str(exc.detail),
        headers={"Connection": "close"}, max_body_bytes=exc.limit,
    )  # fmt: skip


class BodyLimit:
    """413 for a body over ``max_body_bytes``: declared (``Content-Length``, refused before the
    application runs) or received (counted chunk by chunk, refused when the limit is passed)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = limits_of(scope).max_body_bytes
        declared = _content_length(scope["headers"])
        if declared is not None and declared > limit:
            await _refuse_body(scope, receive, send, BodyTooLarge(limit))
            return
        received = 0
        started = False

        async def counting() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(limit)
            return message

        async def tracking(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting, tracking)
        except BodyTooLarge as error:  # read outside a route's body parsing, which answers it itself
            if started:
                raise
            await _refuse_body(scope, receive, send, error)


def _content_length(headers: list[tuple[bytes, bytes]]) -> int | None:
    for name, value in headers:
        if name == b"content-length":
            return int(value) if value.isdigit() else None  # the HTTP server refuses a bad one
    return None


async def _refuse_body(scope: Scope, receive: Receive, send: Send, error: BodyTooLarge) -> None:
    response = await body_too_large(Request(scope), error)
    await response(scope, receive, send)


# -- rate ------------------------------------------------------------------------------------------


def _address(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


async def rate_limit(request: Request, caller: CallerDep) -> None:
    """Admit the request against its caller's bucket (429 when it is empty)."""
    services = services_of(request.scope)
    services.rate_limiter.admit(caller_key(caller, _address(request.scope)), services.limits)


# -- query -----------------------------------------------------------------------------------------


async def bounded_query(request: Request) -> None:
    """Refuse (422) a query parameter given more than :data:`MAX_REPEATED` times."""
    counts = Counter(name for name, _ in request.query_params.multi_items())
    over = sorted(name for name, count in counts.items() if count > MAX_REPEATED)
    if over:
        errors = [
            field_error(
                name, f"at most {MAX_REPEATED} values, not {counts[name]}", "query", code="too_many_values"
            )
            for name in over
        ]
        detail = f"{', '.join(over)}: at most {MAX_REPEATED} values of one query parameter"
        raise ProblemError(422, "validation", "Invalid request", detail, errors=errors)


PER_REQUEST: list[DependsParam] = [Depends(rate_limit), Depends(bounded_query)]
"""The dependencies of every ``/v1`` route (rate first: a caller over its rate learns nothing more)."""

_PROBLEM = PROBLEM_DOC
RESPONSES: dict[int | str, dict[str, Any]] = {
    413: {"description": "The body is larger than the server accepts (--max-body-bytes)", **_PROBLEM},
    429: {
        "description": "Too many requests from this caller (--rate-limit, --rate-burst)",
        "headers": RETRY_AFTER,
        **_PROBLEM,
    },
    431: {
        "description": "Too many header fields, or too long (--max-header-count, --max-header-bytes)",
        **_PROBLEM,
    },
}
"""What every ``/v1`` route may answer because of these limits, for the OpenAPI document."""

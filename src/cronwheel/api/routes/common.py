"""What the routers of jobs, runs and the system share: the services dependency, the checks bound
before a job body is validated, the page parameters, ``If-Match`` and the problems' docs."""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import Depends, Header, Query
from fastapi.responses import JSONResponse

from cronwheel.api import operations
from cronwheel.api.openapi import PROBLEM_DOC
from cronwheel.api.problems import ProblemError, field_error
from cronwheel.api.schemas.base import Documented
from cronwheel.api.schemas.jobs import JobOut
from cronwheel.api.schemas.queries import (
    CursorText,
    PageLimit,
)
from cronwheel.api.services import ApiServices, get_services

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


def problems_doc(*statuses: int) -> dict[int | str, dict[str, Any]]:
    descriptions = {
        400: "Malformed JSON or header",
        401: "No token, or one that is invalid, expired or revoked",
        403: "The token lacks the scope, or may not set a field (another team, a reserved target)",
        404: "No such job or run (or one of a team the token is not of)",
        409: "A live job of this team already has this name, or the team has its quota of live jobs",
        412: "If-Match does not match the job's version",
        422: "Invalid input; nothing was written",
    }
    return {status: {"description": descriptions[status], **PROBLEM_DOC} for status in statuses}


def job_response(job: JobOut, status: int = 200, headers: dict[str, str] | None = None) -> JSONResponse:
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

"""``/v1/jobs/{job_id}/backfills``: backfill a job's past slots, read its backfills' progress, and
cancel one.
Thin, as every router: the body validated here, the decisions in :mod:`cronwheel.api.operations`.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from cronwheel.api import operations
from cronwheel.api.addressing import job_route
from cronwheel.api.callers.auditing import ActorDep
from cronwheel.api.callers.auth import CallerDep
from cronwheel.api.openapi import PROBLEM_DOC
from cronwheel.api.routes.common import Services, problems_doc
from cronwheel.api.schemas.backfills import BackfillIn, BackfillOut, BackfillPage, BackfillPlanOut

router = APIRouter()

BACKFILLS_LISTED = 20  # a job's newest backfills answered by default


@job_route(
    router,
    "POST",
    "/backfills",
    status_code=202,
    response_model=BackfillOut,
    tags=["jobs"],
    responses={
        200: {"model": BackfillPlanOut, "description": "A dry run: what it would do; nothing written"},
        **problems_doc(400, 401, 403, 404, 422),
    },
)
async def backfill_job(
    job_id: str, body: BackfillIn, services: Services, caller: CallerDep, actor: ActorDep
) -> JSONResponse:
    """Record a run (kind ``backfill``) for every slot of the job in [``from``, ``to``] that has
    none, at the server's bounded rate: 202 with the backfill, whose progress
    ``GET .../backfills/{id}`` shows. A slot with a run keeps it, so a second backfill of a range
    creates nothing. Refused (422, nothing written): ``to`` before ``from`` or in the future, no
    slot in the range, too many slots, or more than the confirmation limit without ``confirm``."""
    answer = await operations.backfill_job(services, caller, actor, job_id, body)
    if isinstance(answer, BackfillPlanOut):
        return JSONResponse(answer.model_dump(mode="json", by_alias=True))
    location = f"/v1/jobs/{answer.job_id}/backfills/{answer.id}"
    return JSONResponse(
        answer.model_dump(mode="json", by_alias=True), status_code=202, headers={"Location": location}
    )


@job_route(
    router,
    "GET",
    "/backfills",
    response_model=BackfillPage,
    tags=["jobs"],
    responses=problems_doc(401, 403, 404, 422),
)
async def job_backfills(
    job_id: str,
    services: Services,
    caller: CallerDep,
    limit: Annotated[int, Query(ge=1, le=100)] = BACKFILLS_LISTED,
) -> JSONResponse:
    """The job's backfills with their progress, newest first."""
    page = await operations.job_backfills(services, caller, job_id, limit)
    return JSONResponse(page.model_dump(mode="json", by_alias=True))


@job_route(
    router,
    "GET",
    "/backfills/{backfill_id}",
    response_model=BackfillOut,
    tags=["jobs"],
    responses=problems_doc(401, 403, 404),
)
async def get_backfill(job_id: str, backfill_id: str, services: Services, caller: CallerDep) -> JSONResponse:
    """One backfill of the job and its progress."""
    backfill = await operations.get_backfill(services, caller, job_id, backfill_id)
    return JSONResponse(backfill.model_dump(mode="json", by_alias=True))


@job_route(
    router,
    "POST",
    "/backfills/{backfill_id}/cancel",
    response_model=BackfillOut,
    tags=["jobs"],
    responses={
        **problems_doc(401, 403, 404),
        409: {"description": "The backfill is no longer running (done or cancelled)", **PROBLEM_DOC},
    },
)
async def cancel_backfill(
    job_id: str, backfill_id: str, services: Services, caller: CallerDep, actor: ActorDep
) -> JSONResponse:
    """Stop a running backfill: the backfiller records no run for it after this answer (at its
    next step); the runs it recorded stay, as real runs of real slots. The backfill ends
    ``cancelled``. One already ``done`` or ``cancelled``: 409 ``not-running``, with its
    ``state``; nothing written."""
    backfill = await operations.cancel_backfill(services, caller, actor, job_id, backfill_id)
    return JSONResponse(backfill.model_dump(mode="json", by_alias=True))

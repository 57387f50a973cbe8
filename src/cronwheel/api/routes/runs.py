"""``/v1/runs``: runs of every job of the caller's teams, and one run with its attempts and history."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from cronwheel.api import operations
from cronwheel.api.callers.auth import CallerDep
from cronwheel.api.routes.common import Cursor, Limit, Services, problems_doc
from cronwheel.api.schemas.base import Instant
from cronwheel.api.schemas.queries import (
    DEFAULT_LIMIT,
    Reasons,
    Short,
    States,
)
from cronwheel.api.schemas.runs import RunDetailOut, RunPage
from cronwheel.model import RunState

router = APIRouter()

# -- runs ----------------------------------------------------------------------------------------


@router.get("/runs", response_model=RunPage, tags=["runs"], responses=problems_doc(401, 403, 422))
async def list_runs(
    services: Services,
    caller: CallerDep,
    job_id: Annotated[Short | None, Query()] = None,
    state: Annotated[States, Query()] = [],  # noqa: B006
    limit: Limit = DEFAULT_LIMIT,
    cursor: Cursor = None,
    team: Annotated[Short | None, Query(description="Only runs of this team's jobs.")] = None,
    reason: Annotated[Reasons, Query(description="Only runs skipped for one of these reasons.")] = [],  # noqa: B006
    since: Annotated[Instant | None, Query(description="Only slots at or after this instant.")] = None,
    until: Annotated[Instant | None, Query(description="Only slots before this instant.")] = None,
    late: Annotated[bool, Query(description="Only runs that started over 1 s after they were due.")] = False,
) -> RunPage:
    """Runs of every job of the token's teams (or of one job), newest first (by slot)."""
    states = tuple(RunState(s) for s in state)
    return await operations.list_runs(
        services, caller, job_id, states, limit, cursor,
        team=team, reasons=reason, since=since, until=until, late=late,
    )  # fmt: skip


@router.get(
    "/runs/{run_id}", response_model=RunDetailOut, tags=["runs"], responses=problems_doc(401, 403, 404)
)
async def get_run(run_id: str, services: Services, caller: CallerDep) -> RunDetailOut:
    """One run with its attempts and its state history."""
    return await operations.get_run(services, caller, run_id)

"""``GET /v1/runs/{run_id}/output``: what each attempt of a run wrote, as kept.

The run's details (``GET /v1/runs/{run_id}``) show each attempt's 1 KiB excerpt. An output longer
than that keeps more, up to the worker's ``--output-tail-bytes`` (64 KiB by default): the tail of a
command's stdout and stderr or of a Python traceback, the start of an HTTP response body (which is
read no further). This route reads it, behind the run's team wall (a run of another team is 404,
as the run itself is). A running attempt's answer is its output so far (``kept``: ``running``).
``cronwheel runs logs RUN`` prints it.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field

from cronwheel.api.callers.auth import CallerDep
from cronwheel.api.openapi import PROBLEM_DOC
from cronwheel.api.schemas.base import OutcomeName
from cronwheel.api.services import ApiServices, get_services
from cronwheel.auth.identity import Scope
from cronwheel.model import Attempt

router = APIRouter(tags=["runs"])
Services = Annotated[ApiServices, Depends(get_services)]

_RESPONSES: dict[int | str, dict[str, object]] = {
    401: {"description": "No token, or one that is invalid, expired or revoked", **PROBLEM_DOC},
    403: {"description": "The token lacks the read scope", **PROBLEM_DOC},
    404: {"description": "No such run (or one of a team the token is not of)", **PROBLEM_DOC},
}


# How much of an attempt's output is kept (a choice the API alone defines: the record has the texts)
OutputKept = Literal["whole", "longer", "excerpt", "running"]


class AttemptOutputOut(BaseModel):
    number: int
    outcome: OutcomeName | None
    output: str | None = Field(description="The longest output kept (null: the attempt wrote none).")
    kept: OutputKept | None = Field(
        description="whole: all of it; longer: its kept tail or start beyond the excerpt (see the "
        "route); excerpt: only the 1 KiB excerpt was kept (attempts before output tails, or a tail of 0); "
        "running: the attempt runs, this is its output so far (its last 64 KiB, written by its worker "
        "at most once a second)."
    )

    @classmethod
    def from_record(cls, attempt: Attempt) -> AttemptOutputOut:
        if attempt.finished_at is None:
            running: OutputKept | None = None if attempt.output is None else "running"
            return cls(number=attempt.number, outcome=None, output=attempt.output, kept=running)
        if attempt.output_tail is not None:
            return cls(
                number=attempt.number, outcome=attempt.outcome, output=attempt.output_tail, kept="longer"
            )
        return cls(number=attempt.number, outcome=attempt.outcome, output=attempt.output, kept=_kept(attempt))


def _kept(attempt: Attempt) -> Literal["whole", "excerpt"] | None:
    if attempt.output is None:
        return None
    return "excerpt" if len(attempt.output.encode()) >= 1024 else "whole"


class RunOutputOut(BaseModel):
    run_id: str
    attempts: list[AttemptOutputOut] = Field(description="In attempt order.")


@router.get("/runs/{run_id}/output", response_model=RunOutputOut, responses=_RESPONSES)
async def run_output(run_id: str, services: Services, caller: CallerDep) -> RunOutputOut:
    """What each attempt of the run wrote, as kept (beyond the 1 KiB excerpt of the run's details)."""
    _, team = await services.store.get_run_with_team(run_id)
    caller.require(Scope.READ, team, what=f"run {run_id}")
    attempts = await services.store.list_attempts(run_id)
    return RunOutputOut(run_id=run_id, attempts=[AttemptOutputOut.from_record(a) for a in attempts])

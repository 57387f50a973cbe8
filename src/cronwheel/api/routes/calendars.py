"""The API's team calendars: ``/v1/teams/{team}/calendars[/{name}]``.

A calendar lists closed local days (dates, inclusive ranges, weekdays, a country's public
holidays); a job of the team lists calendars by name and records its slots on those days SKIPPED
(reason ``calendar``). ``read`` lists and shows, ``write`` creates, replaces and deletes; another
team's calendars answer 404 as if they did not exist. The decisions are the functions
:func:`list_page`, :func:`get`, :func:`create`, :func:`replace` and :func:`delete`, which the
routes here and the gRPC API (:mod:`cronwheel.grpc_api`) both call.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from cronwheel.api.callers.auditing import ActorDep
from cronwheel.api.callers.auth import CallerDep
from cronwheel.api.openapi import PROBLEM_DOC
from cronwheel.api.operations import paged
from cronwheel.api.routes.common import Cursor, Limit
from cronwheel.api.schemas.base import NAME_PATTERN
from cronwheel.api.schemas.queries import DEFAULT_LIMIT
from cronwheel.api.services import ApiServices, get_services
from cronwheel.audit import Actor
from cronwheel.auth.identity import Caller, Scope
from cronwheel.jobs.calendars import CalendarService
from cronwheel.model import Calendar
from cronwheel.schedule.calendar import MAX_ITEMS, WEEKDAYS, Holidays, check_spec, spec_to_json

router = APIRouter(tags=["calendars"])

Team = Annotated[str, Path(pattern=NAME_PATTERN, description="The team that owns the calendars.")]
Name = Annotated[str, Path(pattern=NAME_PATTERN, description="The calendar's name in its team.")]
IsoDate = Annotated[str, StringConstraints(pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")]
Weekday = Literal[
    "mon", "tue", "wed", "thu", "fri", "sat", "sun"
]  # calendar.WEEKDAYS (a test holds them equal)
Code = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{1,16}$")]


def calendar_service(services: Annotated[ApiServices, Depends(get_services)]) -> CalendarService:
    return services.calendars


Calendars = Annotated[CalendarService, Depends(calendar_service)]


class DateRange(BaseModel):
    """Closed days from ``from`` to ``to``, both included (ISO dates)."""

    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)

    start: IsoDate = Field(alias="from", description="The first closed day (YYYY-MM-DD).")
    end: IsoDate = Field(alias="to", description="The last closed day (YYYY-MM-DD), not before `from`.")


class HolidaysSpec(BaseModel):
    """A country's public holidays (observed days included), from the `holidays` package."""

    model_config = ConfigDict(extra="forbid", strict=True)

    country: Code = Field(description="ISO 3166-1 alpha-2 code, as the `holidays` package knows it (DE, US).")
    subdivision: Code | None = Field(default=None, description="A subdivision of the country (BY, CA).")


class CalendarBody(BaseModel):
    """What a calendar closes: local dates in the zone of each job that lists it."""

    model_config = ConfigDict(extra="forbid", strict=True)

    description: Annotated[str, StringConstraints(max_length=1000)] = ""
    dates: list[IsoDate] = Field(default_factory=list, max_length=MAX_ITEMS, description="Closed days.")
    ranges: list[DateRange] = Field(default_factory=list, max_length=MAX_ITEMS)
    weekdays: list[Weekday] = Field(
        default_factory=list, max_length=7, description=f"Closed weekdays: {', '.join(WEEKDAYS)}."
    )
    holidays: HolidaysSpec | None = None

    def to_record(self, team: str, name: str) -> Calendar:
        """The calendar (CalendarError, a 422 naming the field, for a bad part)."""
        holidays = (
            None if self.holidays is None else Holidays(self.holidays.country, self.holidays.subdivision)
        )
        spec = check_spec(self.dates, [(r.start, r.end) for r in self.ranges], self.weekdays, holidays)
        return Calendar(team=team, name=name, spec=spec, description=self.description)


class CalendarIn(CalendarBody):
    """The body of ``POST``: a new calendar and its name."""

    name: Annotated[str, StringConstraints(pattern=NAME_PATTERN)]


class CalendarOut(BaseModel):
    model_config = ConfigDict(extra="forbid")

    team: str
    name: str
    description: str
    dates: list[str]
    ranges: list[dict[str, str]] = Field(description="Each {from, to}, both included.")
    weekdays: list[str]
    holidays: dict[str, str | None] | None
    version: int
    created_at: datetime | None
    updated_at: datetime | None

    @classmethod
    def from_record(cls, calendar: Calendar) -> CalendarOut:
        spec = spec_to_json(calendar.spec)
        return cls(
            team=calendar.team,
            name=calendar.name,
            description=calendar.description,
            dates=spec["dates"],
            ranges=spec["ranges"],
            weekdays=spec["weekdays"],
            holidays=spec["holidays"][0] if spec["holidays"] else None,
            version=calendar.version,
            created_at=calendar.created_at,
            updated_at=calendar.updated_at,
        )


class CalendarPage(BaseModel):
    items: list[CalendarOut]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last.")


_PROBLEMS: dict[int | str, dict[str, Any]] = {
    401: {"description": "No token, or one that is invalid, expired or revoked", **PROBLEM_DOC},
    403: {"description": "The token lacks the scope", **PROBLEM_DOC},
    404: {"description": "No such calendar (or a team the caller does not see)", **PROBLEM_DOC},
    422: {"description": "Invalid input; nothing was written", **PROBLEM_DOC},
}
_WRITES: dict[int | str, dict[str, Any]] = {
    **_PROBLEMS,
    400: {"description": "Malformed JSON", **PROBLEM_DOC},
    409: {"description": "The name is taken, or jobs still list the calendar", **PROBLEM_DOC},
}


@router.get("/teams/{team}/calendars", response_model=CalendarPage, responses=_PROBLEMS)
async def list_calendars(
    team: Team, caller: CallerDep, calendars: Calendars, limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None
) -> CalendarPage:
    """The team's calendars by name."""
    return await list_page(calendars, caller, team, limit, cursor)


@router.get("/teams/{team}/calendars/{name}", response_model=CalendarOut, responses=_PROBLEMS)
async def get_calendar(team: Team, name: Name, caller: CallerDep, calendars: Calendars) -> CalendarOut:
    """One calendar."""
    return await get(calendars, caller, team, name)


@router.post("/teams/{team}/calendars", status_code=201, response_model=CalendarOut, responses=_WRITES)
async def create_calendar(
    team: Team, body: CalendarIn, caller: CallerDep, actor: ActorDep, calendars: Calendars
) -> JSONResponse:
    """Create a calendar (409 when the team has one of that name)."""
    created = await create(calendars, caller, actor, team, body)
    return JSONResponse(
        created.model_dump(mode="json"),
        status_code=201,
        headers={"Location": f"/v1/teams/{team}/calendars/{body.name}"},
    )


@router.put("/teams/{team}/calendars/{name}", response_model=CalendarOut, responses=_WRITES)
async def replace_calendar(
    team: Team, name: Name, body: CalendarBody, caller: CallerDep, actor: ActorDep, calendars: Calendars
) -> CalendarOut:
    """Replace a calendar's description and days; every job that lists it follows at once."""
    return await replace(calendars, caller, actor, team, name, body)


@router.delete("/teams/{team}/calendars/{name}", status_code=204, responses=_WRITES)
async def delete_calendar(
    team: Team, name: Name, caller: CallerDep, actor: ActorDep, calendars: Calendars
) -> Response:
    """Delete a calendar that no job lists (409 naming the jobs that do)."""
    await delete(calendars, caller, actor, team, name)
    return Response(status_code=204)


# -- what every call does (REST above, gRPC in cronwheel.grpc_api) -------------------------------


async def list_page(
    calendars: CalendarService, caller: Caller, team: str, limit: int, cursor: str | None
) -> CalendarPage:
    caller.require(Scope.READ, team, what=f"team {team!r}")
    page = await paged(calendars.list(team, limit, cursor))
    return CalendarPage(items=[CalendarOut.from_record(c) for c in page.items], next_cursor=page.next_cursor)


async def get(calendars: CalendarService, caller: Caller, team: str, name: str) -> CalendarOut:
    caller.require(Scope.READ, team, what="calendar")
    return CalendarOut.from_record(await calendars.get(team, name))


async def create(
    calendars: CalendarService, caller: Caller, actor: Actor, team: str, body: CalendarIn
) -> CalendarOut:
    caller.require(Scope.WRITE, team, what="calendar")
    return CalendarOut.from_record(await calendars.create(body.to_record(team, body.name), actor))


async def replace(
    calendars: CalendarService, caller: Caller, actor: Actor, team: str, name: str, body: CalendarBody
) -> CalendarOut:
    caller.require(Scope.WRITE, team, what="calendar")
    return CalendarOut.from_record(await calendars.update(body.to_record(team, name), actor=actor))


async def delete(calendars: CalendarService, caller: Caller, actor: Actor, team: str, name: str) -> None:
    caller.require(Scope.WRITE, team, what="calendar")
    await calendars.delete(team, name, actor)
